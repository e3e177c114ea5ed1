//! One source file to its definitions and references, by a walk of its syntax tree.

use std::collections::BTreeMap;

use tree_sitter::{Node, Parser, TreeCursor};

use crate::lang::{DefKind, Lang, is_identifier};

/// Longest signature kept for the map, in characters.
const MAX_SIGNATURE_CHARS: usize = 160;

/// A definition found in a file. Lines are 1-based and inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Def {
    /// The name as written (`search`).
    pub name: String,
    /// With its enclosing definitions (`CodeIndex::search`, `Client.get`).
    pub qualified: String,
    pub kind: DefKind,
    pub start_line: u32,
    pub end_line: u32,
    /// The definition's first line, trimmed (`pub fn search(&self, q: &str) -> Vec<Hit> {`).
    pub signature: String,
    /// Index of the enclosing definition in the same list.
    pub parent: Option<usize>,
}

/// What a file defines and which identifiers it uses, and how often.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// In source order (a parent before its children).
    pub defs: Vec<Def>,
    pub refs: BTreeMap<String, u32>,
    /// The parser found syntax errors (the definitions it recovered are still listed).
    pub has_errors: bool,
}

/// Parses `source` as `lang`. `None` only if the grammar cannot be loaded or the parser gives
/// up, which callers treat as a file without syntax (line-window chunks, no symbols).
pub fn parse(lang: Lang, source: &str) -> Option<Parsed> {
    let mut parser = Parser::new();
    parser.set_language(&lang.grammar()).ok()?;
    let tree = parser.parse(source, None)?;
    let root = tree.root_node();
    let mut walk = Walk {
        lang,
        source,
        lines: source.lines().collect(),
        parsed: Parsed {
            has_errors: root.has_error(),
            ..Parsed::default()
        },
        open: Vec::new(),
        name_nodes: Vec::new(),
    };
    walk.run(&mut root.walk());
    Some(walk.parsed)
}

struct Walk<'s> {
    lang: Lang,
    source: &'s str,
    lines: Vec<&'s str>,
    parsed: Parsed,
    /// Definitions containing the current node: (index in `defs`, end byte).
    open: Vec<(usize, usize)>,
    /// Byte ranges of definitions' name nodes, which are not references.
    name_nodes: Vec<(usize, usize)>,
}

impl<'s> Walk<'s> {
    /// Iterative pre-order walk: deeply nested code must not overflow the stack.
    fn run(&mut self, cursor: &mut TreeCursor<'_>) {
        loop {
            let node = cursor.node();
            self.visit(node);
            if cursor.goto_first_child() {
                continue;
            }
            loop {
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return;
                }
            }
        }
    }

    fn visit(&mut self, node: Node<'_>) {
        while let Some(&(_, end)) = self.open.last() {
            if node.start_byte() >= end {
                self.open.pop();
            } else {
                break;
            }
        }
        if node.child_count() == 0 {
            if is_identifier(node.kind())
                && !self.is_name_node(node)
                && let Some(text) = self.text(node)
            {
                *self.parsed.refs.entry(text.to_owned()).or_insert(0) += 1;
            }
            return;
        }
        if let Some((kind, name_node, name)) = self.definition(node) {
            self.push_def(node, kind, name_node, name);
        }
    }

    fn is_name_node(&self, node: Node<'_>) -> bool {
        let range = (node.start_byte(), node.end_byte());
        self.name_nodes.iter().rev().take(8).any(|r| *r == range)
    }

    fn text(&self, node: Node<'_>) -> Option<&'s str> {
        self.source.get(node.start_byte()..node.end_byte())
    }

    /// The kind, name node and name of a definition node.
    fn definition<'t>(&self, node: Node<'t>) -> Option<(DefKind, Option<Node<'t>>, String)> {
        let kind_name = node.kind();
        if matches!(self.lang, Lang::JavaScript | Lang::TypeScript | Lang::Tsx)
            && kind_name == "variable_declarator"
        {
            // `const load = async () => {…}` defines a function.
            let value = node.child_by_field_name("value")?;
            if !matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "function" | "generator_function"
            ) {
                return None;
            }
            let name = node.child_by_field_name("name")?;
            return Some((DefKind::Function, Some(name), self.text(name)?.to_owned()));
        }
        let kind = self.lang.definition(kind_name)?;
        if self.lang.needs_body(kind_name) && node.child_by_field_name("body").is_none() {
            return None;
        }
        match (self.lang, kind_name) {
            (Lang::Rust, "impl_item") => {
                let ty = node.child_by_field_name("type")?;
                let ty_text = strip_generics(self.text(ty)?);
                let name = match node.child_by_field_name("trait") {
                    Some(tr) => format!("{} for {ty_text}", strip_generics(self.text(tr)?)),
                    None => ty_text.to_owned(),
                };
                Some((kind, None, name))
            }
            (Lang::C | Lang::Cpp, "function_definition" | "type_definition") => {
                let name = innermost_declarator(node.child_by_field_name("declarator")?);
                Some((kind, Some(name), self.text(name)?.to_owned()))
            }
            (Lang::Go, "method_declaration") => {
                let name = node.child_by_field_name("name")?;
                let receiver = node
                    .child_by_field_name("receiver")
                    .and_then(|r| first_of_kind(r, "type_identifier"))
                    .and_then(|t| self.text(t));
                let name_text = self.text(name)?;
                let full = match receiver {
                    Some(r) => format!("{r}.{name_text}"),
                    None => name_text.to_owned(),
                };
                Some((kind, Some(name), full))
            }
            _ => {
                let name = node.child_by_field_name("name")?;
                Some((kind, Some(name), self.text(name)?.to_owned()))
            }
        }
    }

    fn push_def(
        &mut self,
        node: Node<'_>,
        kind: DefKind,
        name_node: Option<Node<'_>>,
        name: String,
    ) {
        if let Some(n) = name_node {
            self.name_nodes.push((n.start_byte(), n.end_byte()));
        }
        let parent = self.open.last().map(|&(i, _)| i);
        let parent_def = parent.map(|i| &self.parsed.defs[i]);
        let kind = match (kind, parent_def) {
            (DefKind::Function, Some(p)) if p.kind.holds_methods() => DefKind::Method,
            _ => kind,
        };
        let separator = match self.lang {
            Lang::Rust | Lang::Cpp => "::",
            _ => ".",
        };
        let qualified = match parent_def {
            // A Go method already carries its receiver (`Server.Serve`).
            Some(p) => format!("{}{separator}{name}", qualified_prefix(p)),
            None => name.clone(),
        };
        // Decorators and attributes belong to the definition they decorate.
        let outer = match node.parent() {
            Some(p) if p.kind() == "decorated_definition" => p,
            _ => node,
        };
        let start_row = outer.start_position().row;
        let def_row = node.start_position().row;
        let signature = self
            .lines
            .get(def_row)
            .map(|l| cut(l.trim(), MAX_SIGNATURE_CHARS))
            .unwrap_or_default();
        self.parsed.defs.push(Def {
            name: name.rsplit(['.', ':']).next().unwrap_or(&name).to_owned(),
            qualified,
            kind,
            start_line: row_to_line(start_row),
            end_line: row_to_line(end_row(node)),
            signature,
            parent,
        });
        self.open
            .push((self.parsed.defs.len() - 1, node.end_byte()));
    }
}

/// The prefix a definition gives its children: an impl's type, a class's name.
fn qualified_prefix(def: &Def) -> &str {
    match def.kind {
        DefKind::Impl => def
            .qualified
            .rsplit_once(" for ")
            .map_or(def.qualified.as_str(), |(_, ty)| ty),
        _ => &def.qualified,
    }
}

/// The last row a node covers: a node ending at column 0 ends on the row before.
fn end_row(node: Node<'_>) -> usize {
    let end = node.end_position();
    if end.column == 0 && end.row > node.start_position().row {
        end.row - 1
    } else {
        end.row
    }
}

fn row_to_line(row: usize) -> u32 {
    u32::try_from(row + 1).unwrap_or(u32::MAX)
}

fn strip_generics(text: &str) -> &str {
    text.split('<').next().unwrap_or(text).trim()
}

/// A C declarator's name: `*const foo(int)` → `foo`, `Foo::bar` stays qualified.
fn innermost_declarator(mut node: Node<'_>) -> Node<'_> {
    while let Some(inner) = node.child_by_field_name("declarator") {
        node = inner;
    }
    node
}

fn first_of_kind<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut cursor = node.walk();
    loop {
        if cursor.node().kind() == kind {
            return Some(cursor.node());
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() || cursor.node() == node {
                return None;
            }
        }
    }
}

pub(crate) fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(lang: Lang, src: &str) -> Vec<(String, DefKind, u32, u32)> {
        parse(lang, src)
            .unwrap()
            .defs
            .into_iter()
            .map(|d| (d.qualified, d.kind, d.start_line, d.end_line))
            .collect()
    }

    #[test]
    fn rust_definitions_and_methods() {
        let src = "struct Ledger { total: u64 }\n\nimpl Ledger {\n    fn add(&mut self, x: u64) {\n        self.total += x;\n    }\n}\n\nimpl Display for Ledger {\n    fn fmt(&self) {}\n}\n\nfn main() { let l = Ledger { total: 0 }; l.add(1); }\n";
        assert_eq!(
            names(Lang::Rust, src),
            [
                ("Ledger".into(), DefKind::Class, 1, 1),
                ("Ledger".into(), DefKind::Impl, 3, 7),
                ("Ledger::add".into(), DefKind::Method, 4, 6),
                ("Display for Ledger".into(), DefKind::Impl, 9, 11),
                ("Ledger::fmt".into(), DefKind::Method, 10, 10),
                ("main".into(), DefKind::Function, 13, 13),
            ]
        );
        let parsed = parse(Lang::Rust, src).unwrap();
        assert_eq!(parsed.refs.get("Ledger"), Some(&3), "{:?}", parsed.refs);
        assert_eq!(parsed.refs.get("add"), Some(&1));
        assert!(!parsed.refs.contains_key("main"));
        assert!(!parsed.has_errors);
    }

    #[test]
    fn python_decorators_and_classes() {
        let src = "import os\n\nclass Session:\n    @property\n    def headers(self):\n        return os.environ\n\n    def get(self, url):\n        return self.request('GET', url)\n";
        assert_eq!(
            names(Lang::Python, src),
            [
                ("Session".into(), DefKind::Class, 3, 9),
                ("Session.headers".into(), DefKind::Method, 4, 6),
                ("Session.get".into(), DefKind::Method, 8, 9),
            ]
        );
        let parsed = parse(Lang::Python, src).unwrap();
        assert_eq!(parsed.defs[1].signature, "def headers(self):");
    }

    #[test]
    fn javascript_arrow_functions_and_classes() {
        let src = "const load = async (path) => {\n  return read(path);\n};\nclass Cache {\n  get(key) { return this.map[key]; }\n}\n";
        assert_eq!(
            names(Lang::JavaScript, src),
            [
                ("load".into(), DefKind::Function, 1, 3),
                ("Cache".into(), DefKind::Class, 4, 6),
                ("Cache.get".into(), DefKind::Method, 5, 5),
            ]
        );
    }

    #[test]
    fn c_and_go_names() {
        let src = "struct point { int x; };\nstatic int *make_point(int x) {\n  return 0;\n}\nstruct point p;\n";
        assert_eq!(
            names(Lang::C, src),
            [
                ("point".into(), DefKind::Type, 1, 1),
                ("make_point".into(), DefKind::Function, 2, 4),
            ]
        );
        let go = "package x\n\ntype Server struct{}\n\nfunc (s *Server) Serve() error {\n\treturn nil\n}\n";
        assert_eq!(
            names(Lang::Go, go),
            [
                ("Server".into(), DefKind::Type, 3, 3),
                ("Server.Serve".into(), DefKind::Method, 5, 7),
            ]
        );
    }

    #[test]
    fn broken_source_still_parses() {
        let parsed = parse(Lang::Rust, "fn ok() {}\nfn broken( {\n").unwrap();
        assert!(parsed.has_errors);
        assert_eq!(parsed.defs[0].name, "ok");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let src = format!("x = {}1{}\n", "(".repeat(20_000), ")".repeat(20_000));
        assert!(parse(Lang::Python, &src).is_some());
    }
}

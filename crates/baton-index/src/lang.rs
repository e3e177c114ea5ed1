//! The languages the index parses, and what counts as a definition in each.
//!
//! Definitions are recognised by syntax node kind, walking the tree ourselves, rather than by the
//! grammars' bundled `tags.scm` queries: those differ widely in coverage (C's tags a function by
//! its declarator, not its body; Rust's and Python's tag only calls as references), while the
//! node kinds below are stable across grammar releases and give whole definitions to chunk.

use tree_sitter::Language;

/// A language with a tree-sitter grammar compiled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    Java,
    C,
    Cpp,
}

/// What a definition is, for the map and for search hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DefKind {
    Function,
    Method,
    Class,
    Interface,
    Type,
    Module,
    Macro,
    Impl,
    Constant,
}

impl DefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DefKind::Function => "function",
            DefKind::Method => "method",
            DefKind::Class => "class",
            DefKind::Interface => "interface",
            DefKind::Type => "type",
            DefKind::Module => "module",
            DefKind::Macro => "macro",
            DefKind::Impl => "impl",
            DefKind::Constant => "constant",
        }
    }

    pub fn parse(text: &str) -> Option<DefKind> {
        ALL_KINDS.iter().copied().find(|k| k.as_str() == text)
    }

    /// Kinds whose nested functions are methods.
    pub(crate) fn holds_methods(self) -> bool {
        matches!(
            self,
            DefKind::Class | DefKind::Interface | DefKind::Impl | DefKind::Type
        )
    }
}

const ALL_KINDS: [DefKind; 9] = [
    DefKind::Function,
    DefKind::Method,
    DefKind::Class,
    DefKind::Interface,
    DefKind::Type,
    DefKind::Module,
    DefKind::Macro,
    DefKind::Impl,
    DefKind::Constant,
];

impl Lang {
    /// The language of a file, by its extension.
    pub fn of_path(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.')?.1;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
        }
    }

    pub(crate) fn grammar(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    /// The definition kind of a syntax node kind, if it is a definition in this language.
    pub(crate) fn definition(self, node_kind: &str) -> Option<DefKind> {
        use DefKind::*;
        let kind = match (self, node_kind) {
            (Lang::Rust, "function_item" | "function_signature_item") => Function,
            (Lang::Rust, "struct_item" | "enum_item" | "union_item") => Class,
            (Lang::Rust, "type_item") => Type,
            (Lang::Rust, "trait_item") => Interface,
            (Lang::Rust, "impl_item") => Impl,
            (Lang::Rust, "mod_item") => Module,
            (Lang::Rust, "macro_definition") => Macro,
            (Lang::Rust, "const_item" | "static_item") => Constant,
            (Lang::Python, "function_definition") => Function,
            (Lang::Python, "class_definition") => Class,
            (
                Lang::JavaScript | Lang::TypeScript | Lang::Tsx,
                "function_declaration" | "generator_function_declaration",
            ) => Function,
            (Lang::JavaScript | Lang::TypeScript | Lang::Tsx, "method_definition") => Method,
            (
                Lang::JavaScript | Lang::TypeScript | Lang::Tsx,
                "class_declaration" | "abstract_class_declaration",
            ) => Class,
            (Lang::TypeScript | Lang::Tsx, "interface_declaration") => Interface,
            (Lang::TypeScript | Lang::Tsx, "type_alias_declaration" | "enum_declaration") => Type,
            (Lang::TypeScript | Lang::Tsx, "internal_module" | "module") => Module,
            (Lang::Go, "function_declaration") => Function,
            (Lang::Go, "method_declaration") => Method,
            (Lang::Go, "type_spec") => Type,
            (Lang::Java, "method_declaration" | "constructor_declaration") => Method,
            (Lang::Java, "class_declaration" | "enum_declaration" | "record_declaration") => Class,
            (Lang::Java, "interface_declaration" | "annotation_type_declaration") => Interface,
            (Lang::C | Lang::Cpp, "function_definition") => Function,
            (Lang::C | Lang::Cpp, "struct_specifier" | "union_specifier" | "enum_specifier") => {
                Type
            }
            (Lang::C | Lang::Cpp, "type_definition") => Type,
            (Lang::Cpp, "class_specifier") => Class,
            (Lang::Cpp, "namespace_definition") => Module,
            _ => return None,
        };
        Some(kind)
    }

    /// Whether a definition node of `node_kind` counts only with a body (a C `struct x;` or a
    /// bare `struct x` used as a type is a reference, not a definition; so is Rust's `mod x;`).
    pub(crate) fn needs_body(self, node_kind: &str) -> bool {
        matches!(
            (self, node_kind),
            (
                Lang::C | Lang::Cpp,
                "struct_specifier" | "union_specifier" | "enum_specifier" | "class_specifier"
            ) | (Lang::Rust, "mod_item")
        )
    }
}

/// Whether a leaf node kind is an identifier: a reference when it is not a definition's name.
pub(crate) fn is_identifier(node_kind: &str) -> bool {
    node_kind.ends_with("identifier")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grammar_loads() {
        for lang in [
            Lang::Rust,
            Lang::Python,
            Lang::JavaScript,
            Lang::TypeScript,
            Lang::Tsx,
            Lang::Go,
            Lang::Java,
            Lang::C,
            Lang::Cpp,
        ] {
            let mut parser = tree_sitter::Parser::new();
            assert!(parser.set_language(&lang.grammar()).is_ok(), "{lang:?}");
        }
    }

    #[test]
    fn extensions() {
        assert_eq!(Lang::of_path("a/b.rs"), Some(Lang::Rust));
        assert_eq!(Lang::of_path("x.tsx"), Some(Lang::Tsx));
        assert_eq!(Lang::of_path("x.hpp"), Some(Lang::Cpp));
        assert_eq!(Lang::of_path("Makefile"), None);
        assert_eq!(Lang::of_path("README.md"), None);
    }

    #[test]
    fn kinds_round_trip() {
        for kind in ALL_KINDS {
            assert_eq!(DefKind::parse(kind.as_str()), Some(kind));
        }
    }
}

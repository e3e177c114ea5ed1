//! Parsers for flag values, so that a bad value gets words a person reads ("a whole number such
//! as 200") instead of Rust's ("invalid digit found in string", "expected u32"). The flags of
//! [`ConfigLayer`](super::ConfigLayer) use them, and so do the CLI's own.

/// A whole number that fits `T` (`--max-turns 200`, `--budget-tokens 2000000`).
pub fn whole<T: TryFrom<u128>>(text: &str) -> Result<T, String> {
    let digits = text.trim().replace('_', "");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a whole number such as 200, not {text:?}"));
    }
    digits
        .parse::<u128>()
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("{text} is too large for this flag"))
}

/// `--wire-api`: `chat` or `responses`.
pub fn wire_api(text: &str) -> Result<baton_core::WireApi, String> {
    match text.trim() {
        "chat" => Ok(baton_core::WireApi::Chat),
        "responses" => Ok(baton_core::WireApi::Responses),
        _ => Err(format!(
            "expected `chat` (Chat Completions) or `responses` (the Responses API), not {text:?}"
        )),
    }
}

/// `--thinking`: `adaptive`, `enabled` or `off`.
pub fn thinking(text: &str) -> Result<baton_core::Thinking, String> {
    match text.trim() {
        "adaptive" => Ok(baton_core::Thinking::Adaptive),
        "enabled" => Ok(baton_core::Thinking::Enabled),
        "off" => Ok(baton_core::Thinking::Off),
        _ => Err(format!(
            "expected `adaptive`, `enabled` or `off`, not {text:?}"
        )),
    }
}

/// `--verbosity`: `low`, `medium` or `high`.
pub fn verbosity(text: &str) -> Result<baton_core::Verbosity, String> {
    match text.trim() {
        "low" => Ok(baton_core::Verbosity::Low),
        "medium" => Ok(baton_core::Verbosity::Medium),
        "high" => Ok(baton_core::Verbosity::High),
        _ => Err(format!("expected `low`, `medium` or `high`, not {text:?}")),
    }
}

/// `--on-text-reply`: `finish`, `nudge` or `pause`.
pub fn on_text_reply(text: &str) -> Result<baton_core::OnTextReply, String> {
    baton_core::OnTextReply::parse(text)
        .ok_or_else(|| format!("use finish, nudge or pause, not {text:?}"))
}

/// `--no-stream`'s value (`whole`) as the `response_mode` key it sets; `streaming` too, for a
/// caller that parses the key's words.
pub fn response_mode(text: &str) -> Result<baton_core::ResponseMode, String> {
    match text.trim() {
        "whole" => Ok(baton_core::ResponseMode::Whole),
        "streaming" => Ok(baton_core::ResponseMode::Streaming),
        _ => Err(format!("expected `streaming` or `whole`, not {text:?}")),
    }
}

/// A non-negative decimal: an amount of USD (`--budget-usd 2.50`) or of seconds.
pub fn amount(text: &str) -> Result<f64, String> {
    let value = text
        .trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .map_err(|_| format!("expected a number such as 2.50, not {text:?}"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("expected a number of 0 or more, not {text:?}"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_in_words() {
        assert_eq!(whole::<u32>("200"), Ok(200));
        assert_eq!(whole::<u64>("2_000_000"), Ok(2_000_000));
        assert_eq!(
            whole::<u32>("abc"),
            Err("expected a whole number such as 200, not \"abc\"".to_string())
        );
        assert!(whole::<u32>("-1").unwrap_err().contains("whole number"));
        assert!(whole::<u32>("1.5").unwrap_err().contains("whole number"));
        assert_eq!(
            whole::<u16>("70000"),
            Err("70000 is too large for this flag".to_string())
        );
        assert_eq!(
            whole::<u32>("99999999999"),
            Err("99999999999 is too large for this flag".to_string())
        );
    }

    #[test]
    fn response_modes_in_words() {
        assert_eq!(response_mode("whole"), Ok(baton_core::ResponseMode::Whole));
        assert_eq!(
            response_mode("streaming"),
            Ok(baton_core::ResponseMode::Streaming)
        );
        assert!(
            response_mode("both")
                .unwrap_err()
                .contains("`streaming` or `whole`")
        );
    }

    #[test]
    fn amounts_in_words() {
        assert_eq!(amount("2.50"), Ok(2.5));
        assert_eq!(amount("$3"), Ok(3.0));
        assert!(amount("x").unwrap_err().contains("a number such as 2.50"));
        assert!(amount("-1").unwrap_err().contains("0 or more"));
        assert!(amount("NaN").unwrap_err().contains("0 or more"));
        assert!(amount("inf").unwrap_err().contains("0 or more"));
    }
}

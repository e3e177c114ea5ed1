//! Prefix stability: how much of a request a provider's prompt cache can reuse from the one
//! before it.

use baton_core::ModelRequest;

/// The bytes a provider sees in order: tool definitions, then the messages. Providers cache by
/// prefix in this order, so a byte-level common prefix mirrors what their cache can reuse.
pub fn prompt_bytes(request: &ModelRequest) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Serializing plain data cannot fail; an empty contribution would only lower the ratio.
    for tool in &request.tools {
        bytes.extend(serde_json::to_vec(tool).unwrap_or_default());
    }
    for message in &request.messages {
        bytes.extend(serde_json::to_vec(message).unwrap_or_default());
    }
    bytes
}

/// Share of `current` that is identical to the start of `previous`, in 0..=1.
pub fn prefix_stability(previous: &[u8], current: &[u8]) -> f64 {
    if current.is_empty() {
        return 1.0;
    }
    let common = crate::encoder::common_prefix(previous, current);
    common as f64 / current.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stability_is_the_shared_share_of_the_new_prompt() {
        assert_eq!(prefix_stability(b"abcd", b"abcdefgh"), 0.5);
        assert_eq!(prefix_stability(b"abcd", b"abcd"), 1.0);
        assert_eq!(prefix_stability(b"xbcd", b"abcd"), 0.0);
        assert_eq!(prefix_stability(b"abcdefgh", b"abcd"), 1.0);
        assert_eq!(prefix_stability(b"", b""), 1.0);
    }
}

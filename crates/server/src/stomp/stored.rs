//! A message as the embedded broker stores it: its sender's headers, then its body, so
//! that a consumer gets the headers it was sent with.

use bytes::Bytes;

use loadmix_formats::stomp::Frame;

/// Headers of a SEND that are the broker's business, not kept with the message.
pub(super) const OWN_HEADERS: &[&str] = &[
    "destination",
    "receipt",
    "transaction",
    "content-length",
    "subscription",
    "message-id",
    "ack",
    "redelivered",
];

/// What a stored message starts with when it keeps its sender's headers; a stored body
/// without it (an older store's) is a body alone.
const PACKED: &[u8; 4] = b"LMX1";

/// A SEND's message as the store keeps it: its sender's headers, then its body. The
/// frame's own bounds bound both.
pub(super) fn pack(f: &Frame) -> Bytes {
    let kept: Vec<&(String, String)> = f
        .headers
        .iter()
        .filter(|(k, _)| !OWN_HEADERS.contains(&k.as_str()))
        .collect();
    if kept.is_empty() && !f.body.starts_with(PACKED) {
        // A copy: the frame's body is a slice of the buffer it was read into, which a
        // queued message would otherwise keep whole for as long as it waits.
        return Bytes::copy_from_slice(&f.body);
    }
    let mut b = Vec::with_capacity(f.body.len() + 64);
    b.extend_from_slice(PACKED);
    b.extend_from_slice(&(kept.len() as u32).to_le_bytes());
    for (k, v) in kept {
        for part in [k, v] {
            b.extend_from_slice(&(part.len() as u32).to_le_bytes());
            b.extend_from_slice(part.as_bytes());
        }
    }
    b.extend_from_slice(&f.body);
    Bytes::from(b)
}

/// A stored message's headers and body; what does not read as packed is a body alone.
pub(super) fn unpack(stored: &Bytes) -> (Vec<(String, String)>, Bytes) {
    fn read(stored: &[u8]) -> Option<(Vec<(String, String)>, usize)> {
        let mut at = PACKED.len();
        let u32_at = |at: &mut usize| -> Option<usize> {
            let v = u32::from_le_bytes(stored.get(*at..*at + 4)?.try_into().ok()?);
            *at += 4;
            Some(v as usize)
        };
        let n = u32_at(&mut at)?;
        let mut headers = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let mut pair = [String::new(), String::new()];
            for part in pair.iter_mut() {
                let len = u32_at(&mut at)?;
                let bytes = stored.get(at..at.checked_add(len)?)?;
                *part = String::from_utf8(bytes.to_vec()).ok()?;
                at += len;
            }
            let [k, v] = pair;
            headers.push((k, v));
        }
        Some((headers, at))
    }
    if !stored.starts_with(PACKED) {
        return (Vec::new(), stored.clone());
    }
    match read(stored) {
        Some((headers, at)) => (headers, stored.slice(at..)),
        None => (Vec::new(), stored.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadmix_formats::stomp::{Command, Limits};

    #[test]
    fn a_message_keeps_its_senders_headers_and_a_bare_body_stays_bare() {
        let f = Frame::new(Command::Send)
            .header("destination", "/queue/a")
            .header("reply-to", "/queue/r")
            .header("correlation-id", "c-1");
        let mut f = f;
        f.body = Bytes::from_static(b"LMX1 looks packed but is a body");
        let (headers, body) = unpack(&pack(&f));
        assert_eq!(
            headers,
            vec![
                ("reply-to".to_string(), "/queue/r".to_string()),
                ("correlation-id".to_string(), "c-1".to_string())
            ]
        );
        assert_eq!(body, f.body);
        // A body with nothing to keep is stored as it came, and read back as it is.
        let mut bare = Frame::new(Command::Send).header("destination", "/queue/a");
        bare.body = Bytes::from_static(b"plain");
        assert_eq!(pack(&bare), bare.body);
        assert_eq!(unpack(&bare.body), (Vec::new(), bare.body.clone()));
        // A packed message cut short is a body, not a panic.
        let cut = pack(&f).slice(..10);
        assert_eq!(unpack(&cut).1, cut);
    }

    #[test]
    fn a_stored_message_does_not_share_the_buffer_it_was_read_into() {
        use bytes::BytesMut;
        // A small SEND read with a large one behind it, as a connection's buffer holds.
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"SEND\ndestination:/queue/a\n\nsmall\0");
        buf.extend_from_slice(&vec![b'x'; 1 << 20]);
        let whole = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
        let f = loadmix_formats::stomp::decode(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        let kept = pack(&f);
        assert_eq!(kept, "small");
        assert!(
            !whole.contains(&(kept.as_ptr() as usize)),
            "the kept body is a slice of the connection's buffer"
        );
    }
}

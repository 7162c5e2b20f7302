//! vCard as CardDAV's address object resources carry it (RFC 6352 §5.1: one vCard, with a
//! UID): versions 3.0 (RFC 2426) and 4.0 (RFC 6350), read with the `icalendar` crate's
//! content-line parser (the two formats share the grammar of folded lines, names,
//! parameters and values), and the properties a client or a server of loadmix reads: the
//! UID, the formatted name, the email addresses and how large the photos are.

use super::FormatError;

/// The versions CardDAV servers take: 3.0, which RFC 6352 requires of them, and 4.0.
pub const VERSIONS: [&str; 2] = ["3.0", "4.0"];

/// Properties one vCard may have: the parser holds every one, so a hostile body must not
/// choose how many.
pub const MAX_PROPERTIES: usize = 10_000;

/// Email addresses read from one vCard; the rest are counted, not kept.
pub const MAX_EMAILS: usize = 64;

/// A vCard's version, identity and the figures loadmix reads of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Card {
    /// `3.0` or `4.0`.
    pub version: String,
    /// Its UID as written.
    pub uid: String,
    /// FN, its escapes (`\,` `\;` `\n` `\\`) undone.
    pub full_name: String,
    /// Each EMAIL's address (at most [`MAX_EMAILS`]), in order.
    pub emails: Vec<String>,
    /// The bytes of every PHOTO value together, as written (base64 or a URI).
    pub photo_bytes: usize,
    /// Its properties, BEGIN, END and VERSION left out.
    pub properties: usize,
}

/// Parse an address object resource: exactly one vCard of a version in [`VERSIONS`],
/// with a UID and an FN (and, in 3.0, an N). The message says what is wrong, for a 400
/// or a failed operation.
pub fn parse(text: &str) -> Result<Card, FormatError> {
    card_of(text).map_err(FormatError::VCard)
}

/// [`parse`], its message as written.
fn card_of(text: &str) -> Result<Card, String> {
    let unfolded = icalendar::parser::unfold(text);
    check_shape(&unfolded)?;
    let cal = icalendar::parser::read_calendar(&unfolded)
        .map_err(|e| format!("not a vCard: {}", e.lines().nth(1).unwrap_or(e.as_str())))?;
    // `check_shape` let one component through, and nothing beside it.
    let c = cal
        .components
        .first()
        .ok_or("not a vCard: no BEGIN:VCARD")?;
    let named = |n: &'static str| properties_named(c, n);
    let one = |n: &'static str| -> Result<Option<String>, String> {
        let mut all = named(n);
        let first = all.next().map(|p| p.val.as_str().trim().to_string());
        match all.next() {
            Some(_) => Err(format!("the vCard has more than one {n}")),
            None => Ok(first),
        }
    };
    let version = one("VERSION")?.ok_or("the vCard has no VERSION")?;
    if !VERSIONS.contains(&version.as_str()) {
        return Err(format!(
            "vCard version {version:?}: only 3.0 and 4.0 are served"
        ));
    }
    let uid = one("UID")?
        .filter(|u| !u.is_empty())
        .ok_or("the vCard has no UID")?;
    let full_name = named("FN")
        .next()
        .map(|p| unescape(p.val.as_str()))
        .ok_or("the vCard has no FN")?;
    if version == "3.0" && named("N").next().is_none() {
        return Err("a vCard 3.0 must have an N".into());
    }
    Ok(Card {
        uid,
        full_name,
        emails: named("EMAIL")
            .take(MAX_EMAILS)
            .map(|p| p.val.as_str().trim().to_string())
            .collect(),
        photo_bytes: named("PHOTO").map(|p| p.val.as_str().trim().len()).sum(),
        properties: c
            .properties
            .iter()
            .filter(|p| !p.name.as_str().eq_ignore_ascii_case("VERSION"))
            .count(),
        version,
    })
}

/// The properties of `c` named `name`, in any case and any group (`item1.EMAIL`).
fn properties_named<'c>(
    c: &'c icalendar::parser::Component<'c>,
    name: &'static str,
) -> impl Iterator<Item = &'c icalendar::parser::Property<'c>> {
    c.properties.iter().filter(move |p| {
        let full = p.name.as_str();
        let bare = full.rsplit_once('.').map_or(full, |(_, n)| n);
        bare.eq_ignore_ascii_case(name)
    })
}

/// Before the parser sees it: one `BEGIN:VCARD` first, one `END:VCARD` last, nothing
/// nested (vCard has no components inside), at most [`MAX_PROPERTIES`] lines between.
fn check_shape(unfolded: &str) -> Result<(), String> {
    let lines: Vec<&str> = unfolded
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect();
    let is = |l: &str, what: &str| {
        l.get(..what.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(what))
    };
    match (lines.first(), lines.last()) {
        (Some(f), Some(l)) if is(f, "BEGIN:VCARD") && is(l, "END:VCARD") => {}
        _ => {
            return Err(
                "not a vCard: it must begin with BEGIN:VCARD and end with END:VCARD".into(),
            );
        }
    }
    let inner = &lines[1..lines.len() - 1];
    if let Some(l) = inner.iter().find(|l| is(l, "BEGIN:") || is(l, "END:")) {
        return Err(match is(l, "BEGIN:VCARD") || is(l, "END:VCARD") {
            true => "more than one vCard: an address object holds one".into(),
            false => format!("a vCard has no components inside: {}", truncated(l)),
        });
    }
    if inner.len() > MAX_PROPERTIES {
        return Err(format!(
            "the vCard has {} properties, more than {MAX_PROPERTIES}",
            inner.len()
        ));
    }
    Ok(())
}

/// A line for a message: its first 60 characters.
fn truncated(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// A TEXT value with its escapes undone (RFC 6350 §3.4).
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n' | 'N') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// A contact to write as a vCard: the fields address book clients write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewCard {
    /// `3.0` or `4.0` (anything else is written as 4.0).
    pub version: String,
    /// Its UID, written as it is.
    pub uid: String,
    /// The given and family names: N's first two parts, and FN joined by a space.
    pub given: String,
    /// See `given`.
    pub family: String,
    /// EMAIL addresses, the first preferred.
    pub emails: Vec<String>,
    /// TEL numbers, as mobiles.
    pub phones: Vec<String>,
    /// A NOTE.
    pub note: Option<String>,
    /// CATEGORIES, each escaped.
    pub categories: Vec<String>,
    /// A JPEG's bytes, base64-encoded as each version writes a photo inline.
    pub photo: Option<Vec<u8>>,
}

/// The longest line a vCard writer makes, in octets, its line break not counted
/// (RFC 6350 §3.2; RFC 2426 the same).
pub const LINE_OCTETS: usize = 75;

/// `card` as a vCard of its version: TEXT values escaped, lines folded at
/// [`LINE_OCTETS`] (never inside a character), CRLF line ends.
pub fn write(card: &NewCard) -> String {
    use base64::Engine as _;
    let v3 = card.version == "3.0";
    let text = super::ical::escape_text;
    let full_name = format!("{} {}", card.given, card.family);
    let mut lines = vec![
        "BEGIN:VCARD".to_string(),
        format!("VERSION:{}", if v3 { "3.0" } else { "4.0" }),
        format!("UID:{}", card.uid),
        format!("FN:{}", text(full_name.trim())),
        format!("N:{};{};;;", text(&card.family), text(&card.given)),
    ];
    for (i, e) in card.emails.iter().enumerate() {
        let pref = match (i, v3) {
            (0, true) => ",PREF",
            (0, false) => ";PREF=1",
            _ => "",
        };
        lines.push(format!("EMAIL;TYPE=INTERNET{pref}:{}", text(e)));
    }
    lines.extend(
        card.phones
            .iter()
            .map(|p| format!("TEL;TYPE=CELL:{}", text(p))),
    );
    if let Some(n) = &card.note {
        lines.push(format!("NOTE:{}", text(n)));
    }
    if !card.categories.is_empty() {
        let each: Vec<String> = card.categories.iter().map(|c| text(c)).collect();
        lines.push(format!("CATEGORIES:{}", each.join(",")));
    }
    if let Some(jpeg) = &card.photo {
        let b64 = base64::engine::general_purpose::STANDARD.encode(jpeg);
        lines.push(match v3 {
            true => format!("PHOTO;ENCODING=b;TYPE=JPEG:{b64}"),
            false => format!("PHOTO:data:image/jpeg;base64,{b64}"),
        });
    }
    lines.push("END:VCARD".to_string());
    let mut out = String::new();
    for l in &lines {
        fold_into(&mut out, l);
    }
    out
}

/// `line` onto `out`, folded: a CRLF and a space before each piece past the first, each
/// line at most [`LINE_OCTETS`] octets with its leading space.
fn fold_into(out: &mut String, line: &str) {
    let mut room = LINE_OCTETS;
    let mut used = 0;
    for c in line.chars() {
        if used + c.len_utf8() > room {
            out.push_str("\r\n ");
            // The space that marks a folded line is one of its octets.
            (room, used) = (LINE_OCTETS - 1, 0);
        }
        out.push(c);
        used += c.len_utf8();
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const V3: &str = "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:urn:uuid:4fbe8971-0bc3-424c-9c26-36c3e1eff6b1\r\nN:Doe;Jane;;;\r\nFN:Jane Doe\\, MD\r\nitem1.EMAIL;TYPE=INTERNET,pref:jane@example.com\r\nEMAIL;TYPE=work:j.doe@exa\r\n mple.org\r\nTEL;TYPE=CELL:+1 555 0100\r\nPHOTO;ENCODING=b;TYPE=JPEG:QUJD\r\n REVG\r\nEND:VCARD\r\n";

    #[test]
    fn a_cards_identity_emails_and_photo_are_read_through_folds_and_groups() {
        let c = parse(V3).unwrap();
        assert_eq!(c.version, "3.0");
        assert_eq!(c.uid, "urn:uuid:4fbe8971-0bc3-424c-9c26-36c3e1eff6b1");
        assert_eq!(c.full_name, "Jane Doe, MD");
        // A group prefix (Apple's `item1.`) names the same property; a fold joins.
        assert_eq!(c.emails, ["jane@example.com", "j.doe@example.org"]);
        assert_eq!(c.photo_bytes, 8);
        assert_eq!(c.properties, 7);
        let v4 = "BEGIN:VCARD\nVERSION:4.0\nFN:Bob\nUID:b1\nEND:VCARD\n";
        let c = parse(v4).unwrap();
        assert_eq!((c.version.as_str(), c.uid.as_str()), ("4.0", "b1"));
        assert!(c.emails.is_empty());
    }

    #[test]
    fn what_carddav_servers_refuse_is_refused_and_named() {
        let cases = [
            ("", "BEGIN:VCARD"),
            ("BEGIN:VCALENDAR\nEND:VCALENDAR\n", "BEGIN:VCARD"),
            ("BEGIN:VCARD\nFN:x\nUID:u\nEND:VCARD\n", "no VERSION"),
            (
                "BEGIN:VCARD\nVERSION:2.1\nFN:x\nUID:u\nEND:VCARD\n",
                "only 3.0 and 4.0",
            ),
            (
                "BEGIN:VCARD\nVERSION:4.0\nVERSION:3.0\nFN:x\nUID:u\nEND:VCARD\n",
                "more than one VERSION",
            ),
            ("BEGIN:VCARD\nVERSION:4.0\nFN:x\nEND:VCARD\n", "no UID"),
            (
                "BEGIN:VCARD\nVERSION:4.0\nFN:x\nUID:\nEND:VCARD\n",
                "no UID",
            ),
            ("BEGIN:VCARD\nVERSION:4.0\nUID:u\nEND:VCARD\n", "no FN"),
            (
                "BEGIN:VCARD\nVERSION:3.0\nFN:x\nUID:u\nEND:VCARD\n",
                "must have an N",
            ),
            (
                "BEGIN:VCARD\nVERSION:4.0\nFN:x\nUID:u\nEND:VCARD\nBEGIN:VCARD\nVERSION:4.0\nFN:y\nUID:v\nEND:VCARD\n",
                "more than one vCard",
            ),
            (
                "BEGIN:VCARD\nVERSION:4.0\nBEGIN:VEVENT\nEND:VEVENT\nFN:x\nUID:u\nEND:VCARD\n",
                "no components inside",
            ),
            ("BEGIN:VCARD\nVERSION:4.0\nFN:x\nUID:u\n", "END:VCARD"),
            (
                "BEGIN:VCARD\nVERSION:4.0\nFN x\nUID:u\nEND:VCARD\n",
                "not a vCard",
            ),
        ];
        for (text, why) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_properties_of_one_card_are_bounded() {
        let mut text = String::from("BEGIN:VCARD\nVERSION:4.0\nFN:x\nUID:u\n");
        for i in 0..MAX_PROPERTIES {
            text.push_str(&format!("EMAIL:{i}@example.com\n"));
        }
        text.push_str("END:VCARD\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("more than 10000"), "{e}");
        // Under the bound it is read, its emails kept up to theirs.
        let fewer: String = text.lines().skip(10).map(|l| format!("{l}\n")).collect();
        let c = parse(&format!("BEGIN:VCARD\nVERSION:4.0\nFN:x\nUID:u\n{fewer}")).unwrap();
        assert_eq!(c.emails.len(), MAX_EMAILS);
    }

    #[test]
    fn a_written_card_reads_back_folded_within_its_line_length() {
        let mut card = NewCard {
            version: "3.0".into(),
            uid: "c-1".into(),
            given: "Zoë".into(),
            family: "O'Brien, Jr.; née Łukasiewicz".into(),
            emails: vec!["zoe@example.com".into(), "z@example.org".into()],
            phones: vec!["+353 1 555 0100".into()],
            note: Some("Met at FOSDEM\nbring the 日本語 book\\".into()),
            categories: vec!["work".into(), "a,b".into()],
            photo: Some((0..=255u8).cycle().take(5_000).collect()),
        };
        for version in ["3.0", "4.0"] {
            card.version = version.into();
            let text = write(&card);
            for line in text.split("\r\n") {
                assert!(line.len() <= LINE_OCTETS, "{} octets: {line:?}", line.len());
            }
            let back = parse(&text).unwrap();
            assert_eq!(back.version, version);
            assert_eq!(back.uid, "c-1");
            assert_eq!(back.full_name, "Zoë O'Brien, Jr.; née Łukasiewicz");
            assert_eq!(back.emails, ["zoe@example.com", "z@example.org"]);
            // 5,000 bytes are 6,668 in base64; 4.0 writes them as a data URI.
            let prefix = if version == "3.0" {
                0
            } else {
                "data:image/jpeg;base64,".len()
            };
            assert_eq!(back.photo_bytes, 6_668 + prefix);
        }
    }
}

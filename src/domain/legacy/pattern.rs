//! Key patterns such as `uploads/{owner}/*`: which segment of a legacy key names its owner.
//! `--owner-pattern` gives one; a key it does not match is refused, never guessed.

/// One segment of a key pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `before{owner}after`: the owner is what lies between.
    Owner {
        before: String,
        after: String,
    },
    /// `*`: one segment, or, last, the rest of the key (one segment or more).
    Any,
}

/// A key pattern such as `uploads/{owner}/*`: `/`-separated segments, exactly one of which
/// holds `{owner}` (with literal text around it if wanted: `user-{owner}`); `*` is a whole
/// segment matching one non-empty segment, or, as the last segment, the non-empty rest of the
/// key. Everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternError {
    Empty,
    EmptySegment,
    NoOwner,
    SeveralOwners,
    /// `*` inside a segment (`a*`), or a stray `{` / `}`.
    BadSegment,
    /// The pattern would match a key without anything after the owner's segment: a key is a
    /// file, so the pattern must end with `*` or a literal file segment.
    EndsWithOwner,
}

impl PatternError {
    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "the pattern is empty",
            Self::EmptySegment => {
                "the pattern has an empty segment (// or a leading or trailing /)"
            }
            Self::NoOwner => "the pattern has no {owner} segment",
            Self::SeveralOwners => "the pattern has more than one {owner}",
            Self::BadSegment => "`*` must be a whole segment, and { } appear only in {owner}",
            Self::EndsWithOwner => "the pattern must not end with the {owner} segment",
        }
    }
}

const OWNER: &str = "{owner}";

impl KeyPattern {
    pub fn parse(raw: &str) -> Result<Self, PatternError> {
        if raw.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut segments = Vec::new();
        let mut owners = 0;
        for part in raw.split('/') {
            if part.is_empty() {
                return Err(PatternError::EmptySegment);
            }
            let seg = if part == "*" {
                Segment::Any
            } else if let Some((before, after)) = part.split_once(OWNER) {
                owners += 1;
                if [before, after].iter().any(|s| s.contains(['*', '{', '}'])) {
                    return Err(if after.contains(OWNER) {
                        PatternError::SeveralOwners
                    } else {
                        PatternError::BadSegment
                    });
                }
                Segment::Owner {
                    before: before.to_owned(),
                    after: after.to_owned(),
                }
            } else if part.contains(['*', '{', '}']) {
                return Err(PatternError::BadSegment);
            } else {
                Segment::Literal(part.to_owned())
            };
            segments.push(seg);
        }
        match owners {
            0 => return Err(PatternError::NoOwner),
            1 => {}
            _ => return Err(PatternError::SeveralOwners),
        }
        if matches!(segments.last(), Some(Segment::Owner { .. })) {
            return Err(PatternError::EndsWithOwner);
        }
        Ok(Self { segments })
    }

    /// The owner a key names, or `None` when the pattern does not match it. The owner is then
    /// still to be parsed ([`Owner::parse`](super::Owner::parse)).
    pub fn owner_text<'k>(&self, key: &'k str) -> Option<&'k str> {
        let parts: Vec<&str> = key.split('/').collect();
        let mut owner = None;
        for (i, seg) in self.segments.iter().enumerate() {
            let last = i + 1 == self.segments.len();
            match seg {
                Segment::Any if last => {
                    let rest = parts.get(i..)?;
                    return (!rest.is_empty() && rest.iter().all(|p| !p.is_empty()))
                        .then_some(owner)
                        .flatten();
                }
                Segment::Any => {
                    if parts.get(i)?.is_empty() {
                        return None;
                    }
                }
                Segment::Literal(l) => {
                    if parts.get(i)? != l {
                        return None;
                    }
                }
                Segment::Owner { before, after } => {
                    let part = parts.get(i)?;
                    let text = part.strip_prefix(before.as_str())?;
                    owner = Some(text.strip_suffix(after.as_str())?);
                }
            }
        }
        (parts.len() == self.segments.len())
            .then_some(owner)
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> KeyPattern {
        KeyPattern::parse(p).expect("pattern")
    }

    #[test]
    fn patterns_parse_with_exactly_one_owner_and_whole_segment_wildcards() {
        assert!(KeyPattern::parse("uploads/{owner}/*").is_ok());
        assert!(KeyPattern::parse("u/user-{owner}.d/*/x.png").is_ok());
        assert!(KeyPattern::parse("{owner}/*").is_ok());
        assert_eq!(KeyPattern::parse(""), Err(PatternError::Empty));
        assert_eq!(KeyPattern::parse("uploads/*"), Err(PatternError::NoOwner));
        assert_eq!(
            KeyPattern::parse("{owner}/{owner}/*"),
            Err(PatternError::SeveralOwners)
        );
        assert_eq!(
            KeyPattern::parse("u/{owner}{owner}/*"),
            Err(PatternError::SeveralOwners)
        );
        assert_eq!(
            KeyPattern::parse("uploads//{owner}/*"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("/uploads/{owner}/*"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}/"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}/a*"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}*/x"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{user}/{owner}/x"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}"),
            Err(PatternError::EndsWithOwner)
        );
    }

    #[test]
    fn a_pattern_takes_the_owner_from_its_segment() {
        let p = pattern("uploads/{owner}/*");
        assert_eq!(p.owner_text("uploads/alice/1.png"), Some("alice"));
        assert_eq!(p.owner_text("uploads/alice/2026/1.png"), Some("alice"));
        assert_eq!(p.owner_text("uploads/alice/"), None, "nothing after");
        assert_eq!(p.owner_text("uploads/alice"), None);
        assert_eq!(p.owner_text("uploads/alice//x"), None);
        assert_eq!(p.owner_text("other/alice/1.png"), None);
        assert_eq!(p.owner_text("uploads//1.png"), Some(""), "then refused");

        let q = pattern("u/user-{owner}.d/*/f.png");
        assert_eq!(q.owner_text("u/user-bob.d/x/f.png"), Some("bob"));
        assert_eq!(q.owner_text("u/user-bob.d/x/g.png"), None);
        assert_eq!(q.owner_text("u/user-bob.d/x/y/f.png"), None);
        assert_eq!(q.owner_text("u/bob.d/x/f.png"), None);
        assert_eq!(q.owner_text("u/user-bob.d/f.png"), None);
    }
}

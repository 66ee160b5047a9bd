//! What the server and a render worker say to each other over the worker's standard input and
//! output (issue 46). Each message is a frame: a little-endian `u32` length and that much JSON
//! (the header), then a little-endian `u64` length and that many bytes (the body: a source's
//! bytes, a rendition's, or nothing). Pure: framing over `Read`/`Write`, and the plan and reply
//! in the renderer's own terms.
//!
//! The worker is untrusted once it has read a source: the server bounds every length it reads
//! from it ([`MAX_HEADER_BYTES`], and the body by the caller), and takes nothing from a reply
//! but a rendition's bytes, its size and one of the renderer's refusals.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{Fit, OutputFormat};
use crate::render::{Limits, Output, RenderError, Rendered, Source};

/// A frame's JSON header is at most this long (a plan or a reply is a few hundred bytes).
pub const MAX_HEADER_BYTES: u32 = 64 * 1024;

/// What a worker says once it is ready, before it reads a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The seccomp filter is applied (and `no_new_privs` set).
    pub jailed: bool,
    /// Why it is not, when it is not.
    pub why: Option<String>,
}

/// What a worker says once it has read a plan and its whole source, before it renders: from
/// then on, what happens to it is the file's doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// The source's bytes it read.
    pub read: u64,
}

/// One render, as the worker is asked for it: the source's bytes follow as the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub source: String,
    /// The EXIF orientation the source is displayed with.
    pub orientation: u16,
    pub width: u32,
    pub height: u32,
    pub fit: String,
    pub format: String,
    pub quality: u8,
    pub max_pixels: u64,
    /// The worker's data limit for this render (`RLIMIT_DATA`, soft), in bytes: the memory
    /// the server reserved for it plus the worker's own margin.
    pub memory_limit: u64,
}

/// A render as the renderer takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub source: Source,
    pub orientation: Transform,
    pub box_: Dimensions,
    pub fit: Fit,
    pub out: Output,
    pub limits: Limits,
}

impl Plan {
    pub fn of(job: &Job, memory_limit: u64) -> Plan {
        Plan {
            source: job.source.as_str().to_owned(),
            orientation: job.orientation.exif(),
            width: job.box_.width,
            height: job.box_.height,
            fit: job.fit.as_str().to_owned(),
            format: job.out.format.as_str().to_owned(),
            quality: job.out.quality,
            max_pixels: job.limits.max_pixels,
            memory_limit,
        }
    }

    /// The render this plan asks for, or why it cannot be read.
    pub fn job(&self) -> Result<Job, String> {
        Ok(Job {
            source: Source::parse(&self.source).ok_or("an unknown source format")?,
            orientation: Transform::from_exif(self.orientation),
            box_: Dimensions {
                width: self.width,
                height: self.height,
            },
            fit: Fit::parse(&self.fit).ok_or("an unknown fit")?,
            out: Output {
                format: OutputFormat::parse(&self.format).ok_or("an unknown output format")?,
                quality: self.quality,
            },
            limits: Limits {
                max_pixels: self.max_pixels,
            },
        })
    }
}

/// A worker's answer to a [`Plan`]: a rendition (its bytes are the body) or a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    Rendered {
        width: u32,
        height: u32,
        format: String,
    },
    Corrupt {
        why: String,
    },
    TooManyPixels {
        pixels: u64,
        max: u64,
    },
    Unsupported {
        what: String,
    },
    Internal {
        why: String,
    },
    /// The plan itself could not be read (a server and a worker of different builds).
    BadPlan {
        why: String,
    },
}

impl Reply {
    /// The reply to a render's result, and its body.
    pub fn of(result: Result<Rendered, RenderError>) -> (Reply, Vec<u8>) {
        match result {
            Ok(r) => {
                let format = match r.content_type {
                    "image/webp" => OutputFormat::Webp,
                    "image/avif" => OutputFormat::Avif,
                    _ => OutputFormat::Jpeg,
                };
                (
                    Reply::Rendered {
                        width: r.width,
                        height: r.height,
                        format: format.as_str().to_owned(),
                    },
                    r.bytes,
                )
            }
            Err(RenderError::Corrupt(why)) => (Reply::Corrupt { why }, Vec::new()),
            Err(RenderError::TooManyPixels { pixels, max }) => {
                (Reply::TooManyPixels { pixels, max }, Vec::new())
            }
            Err(RenderError::Unsupported(what)) => (
                Reply::Unsupported {
                    what: what.to_owned(),
                },
                Vec::new(),
            ),
            Err(RenderError::Internal(why)) => (Reply::Internal { why }, Vec::new()),
        }
    }

    /// The render's result this reply (with its `body`) stands for, as an answer to `job`: a
    /// rendition larger than the job's box, or of another format, is the worker's lie (it has
    /// read a stranger's bytes) and is refused, never stored.
    pub fn into_result(self, body: Vec<u8>, job: &Job) -> Result<Rendered, RenderError> {
        match self {
            Reply::Rendered {
                width,
                height,
                format,
            } => {
                let lie = |what: &str| {
                    RenderError::Internal(format!("the worker answered {what} the job did not ask"))
                };
                let format = OutputFormat::parse(&format).ok_or_else(|| lie("a format"))?;
                if format != job.out.format {
                    return Err(lie("a format"));
                }
                if width == 0 || height == 0 || width > job.box_.width || height > job.box_.height {
                    return Err(lie("a size"));
                }
                Ok(Rendered {
                    bytes: body,
                    width,
                    height,
                    content_type: format.content_type(),
                })
            }
            Reply::Corrupt { why } => Err(RenderError::Corrupt(why)),
            Reply::TooManyPixels { pixels, max } => Err(RenderError::TooManyPixels { pixels, max }),
            Reply::Unsupported { what } => Err(RenderError::Unsupported(unsupported(&what))),
            Reply::Internal { why } | Reply::BadPlan { why } => Err(RenderError::Internal(why)),
        }
    }
}

/// The renderer's names for what it does not draw, as `'static` strings again.
fn unsupported(what: &str) -> &'static str {
    match what {
        "an animated WebP" => "an animated WebP",
        _ => "this image",
    }
}

/// Writes one frame: `header` as JSON, then `body`.
pub fn write_frame<T: Serialize>(w: &mut impl Write, header: &T, body: &[u8]) -> io::Result<()> {
    let json = serde_json::to_vec(header).map_err(io::Error::other)?;
    w.write_all(&frame_head(&json))?;
    w.write_all(&(body.len() as u64).to_le_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// A frame's length prefix and JSON header.
pub fn frame_head(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(json);
    out
}

/// Reads one frame's header (at most [`MAX_HEADER_BYTES`]) and the length of the body that
/// follows; the caller reads the body.
pub fn read_head<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> io::Result<(T, u64)> {
    let mut n = [0u8; 4];
    r.read_exact(&mut n)?;
    let mut json = header_buffer(u32::from_le_bytes(n))?;
    r.read_exact(&mut json)?;
    let header = header_of(&json)?;
    let mut len = [0u8; 8];
    r.read_exact(&mut len)?;
    Ok((header, u64::from_le_bytes(len)))
}

/// The buffer for a frame header of `n` bytes, refused past [`MAX_HEADER_BYTES`] before
/// anything is allocated (the server reads a worker's frames through the same two steps).
pub fn header_buffer(n: u32) -> io::Result<Vec<u8>> {
    if n > MAX_HEADER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame header of {n} bytes"),
        ));
    }
    Ok(vec![0u8; n as usize])
}

/// A frame header's JSON, read.
pub fn header_of<T: for<'de> Deserialize<'de>>(json: &[u8]) -> io::Result<T> {
    serde_json::from_slice(json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_and_a_reply_cross_the_pipe_unchanged() {
        let job = Job {
            source: Source::Heif,
            orientation: Transform::from_exif(6),
            box_: Dimensions {
                width: 320,
                height: 200,
            },
            fit: Fit::Contain,
            out: Output::webp(70),
            limits: Limits { max_pixels: 1000 },
        };
        let plan = Plan::of(&job, 123);
        let mut wire = Vec::new();
        write_frame(&mut wire, &plan, b"source").expect("write");
        let mut r = &wire[..];
        let (back, len): (Plan, u64) = read_head(&mut r).expect("read");
        assert_eq!(back, plan);
        assert_eq!(back.job().expect("job"), job);
        assert_eq!(len, 6);
        assert_eq!(r, b"source");

        let (reply, body) = Reply::of(Ok(Rendered {
            bytes: vec![1, 2, 3],
            width: 4,
            height: 5,
            content_type: "image/webp",
        }));
        let done = reply.into_result(body, &job).expect("rendered");
        assert_eq!(done.content_type, "image/webp");
        assert_eq!(done.bytes, vec![1, 2, 3]);
        let (reply, body) = Reply::of(Err(RenderError::Unsupported("an animated WebP")));
        assert_eq!(
            reply.into_result(body, &job),
            Err(RenderError::Unsupported("an animated WebP"))
        );
    }

    #[test]
    fn a_rendition_larger_than_its_box_or_of_another_format_is_refused_as_a_lie() {
        let job = Job {
            source: Source::Jpeg,
            orientation: Transform::UPRIGHT,
            box_: Dimensions {
                width: 320,
                height: 200,
            },
            fit: Fit::Cover,
            out: Output::jpeg(80),
            limits: Limits { max_pixels: 1000 },
        };
        let rendered = |width, height, format: &str| Reply::Rendered {
            width,
            height,
            format: format.to_owned(),
        };
        assert!(rendered(320, 200, "jpeg")
            .into_result(vec![1], &job)
            .is_ok());
        for lie in [
            rendered(321, 200, "jpeg"),
            rendered(320, 90_000, "jpeg"),
            rendered(0, 200, "jpeg"),
            rendered(320, 200, "webp"),
            rendered(320, 200, "gif"),
        ] {
            assert!(matches!(
                lie.into_result(vec![1], &job),
                Err(RenderError::Internal(_))
            ));
        }
    }

    #[test]
    fn a_header_longer_than_the_bound_is_refused_before_it_is_read() {
        let mut wire = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
        wire.extend_from_slice(&[b'{'; 16]);
        let err = read_head::<Reply>(&mut &wire[..]).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}

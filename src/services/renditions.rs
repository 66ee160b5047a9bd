//! A file's rendition for one of its profile's variants (issue 37): found under `cache/`, or
//! rendered first (the source read whole, the render on a blocking thread within this
//! replica's slots, the bytes written with `If-None-Match: *`), then answered as a short-lived
//! GET URL with the rendition's size and type. Who may ask is the caller's (the file routes'
//! visibility rule); this module refuses what cannot be rendered.

use std::time::Instant;

use crate::domain::image::{self, Dimensions, Format, Parsed};
use crate::domain::records::{FileHandle, HandleStatus};
use crate::domain::variants::{refusal, OutputFormat, Variant};
use crate::error::AppError;
use crate::jail::Outcome;
use crate::metrics::RenderOutcome;
use crate::render::{Limits, RenderError, Source};
use crate::services::render_failures::{content_of, refused_because, settle};
use crate::state::renders::Known;
use crate::state::AppState;
use crate::storage::{NewObject, PutOutcome};

/// The largest source a render reads (it is read whole): 64 MiB, above any camera's JPEG.
pub const MAX_RENDER_SOURCE_BYTES: u64 = 64 * MIB;

const MIB: u64 = 1024 * 1024;

/// Why a render waits its turn (503 `render_busy`).
const SLOTS_TAKEN: &str = "every render slot of this server is taken";
const MEMORY_HELD: &str =
    "the renders running on this server hold the memory this one needs (UPCOMMIT_RENDER_MEMORY_MIB)";

/// A rendition's GET URL and what it holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RenditionUrl {
    pub variant: String,
    pub url: String,
    pub width: u32,
    pub height: u32,
    pub content_type: &'static str,
    pub size: i64,
    pub expires_in: u64,
    /// Found in the cache (false: rendered for this request).
    pub cached: bool,
}

/// The rendition of `file` for its profile's variant `name`.
pub async fn rendition(
    state: &AppState,
    file: &FileHandle,
    name: &str,
) -> Result<RenditionUrl, AppError> {
    let variant = state
        .settings
        .profile(&file.profile)
        .and_then(|p| p.variants.iter().find(|v| v.name == name))
        .ok_or(AppError::VariantNotFound)?
        .clone();
    match file.status {
        HandleStatus::Deleted => return Err(AppError::FileDeleted),
        HandleStatus::Expired => return Err(AppError::FileExpired),
        HandleStatus::Archived => return Err(AppError::FileArchived),
        HandleStatus::Available | HandleStatus::Unlinked => {}
    }
    let format = Format::of_content_type(&file.content_type)
        .ok_or(AppError::ImageNotRendered("a file that is not an image"))?;
    source_of(format)?;
    if variant.format == OutputFormat::Avif && !upcommit_heif::can_encode(upcommit_heif::Codec::Av1)
    {
        return Err(AppError::ImageNotRendered(
            "an AVIF rendition (this libheif has no AV1 encoder)",
        ));
    }
    let key = variant.key(&file.id);
    // Seen in the store within the last minutes: answered without asking it again.
    if let Some(k) = state.renders.known(&key) {
        state.metrics.rendition_cache(true);
        return answer(state, &variant, &key, k, true).await;
    }
    if let Some(h) = state.store.head(&key).await? {
        state.metrics.rendition_cache(true);
        return answer(
            state,
            &variant,
            &key,
            seen(state, &key, h.size, &h.metadata),
            true,
        )
        .await;
    }
    // One render of this key on this replica at a time: the others wait (as long as a request
    // waits for its rendition), then find it.
    let secs = state.settings.uploads.render_timeout_secs;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    let lock = state.renders.key_lock(&key);
    let held = tokio::time::timeout_at(deadline, lock.lock_owned())
        .await
        .map_err(|_| AppError::RenderTimedOut(secs))?;
    if let Some(h) = state.store.head(&key).await? {
        state.metrics.rendition_cache(true);
        return answer(
            state,
            &variant,
            &key,
            seen(state, &key, h.size, &h.metadata),
            true,
        )
        .await;
    }
    state.metrics.rendition_cache(false);
    // A render that killed its worker, or ran past the limit twice in a row, is not tried
    // again (issue 46): the same bytes would do it again, on every replica.
    let failed = state
        .catalog
        .render_failure(file.id.as_str(), &content_of(file), &variant.name)
        .await?;
    if let Some(f) = &failed {
        if refusal::refused(&f.cause, f.count) {
            state.metrics.render_outcome(RenderOutcome::Refused, None);
            return Err(AppError::ImageUnrenderable(refused_because(f)));
        }
    }
    // The render is a task of its own holding the key's lock: a request that stops waiting
    // (its time limit, or its client gone) does not stop it, and the rendition is kept.
    let task = {
        let (state, file, variant, key) = (state.clone(), file.clone(), variant.clone(), key);
        tokio::spawn(async move {
            let _held = held;
            let mut ran_for = None;
            let mut cause = None;
            let rendered = render_and_store(
                &state,
                &file,
                &variant,
                &key,
                deadline,
                &mut ran_for,
                &mut cause,
            )
            .await;
            settle(
                &state,
                &file,
                &variant,
                failed.is_some(),
                rendered.is_ok(),
                cause,
            )
            .await;
            let outcome = match (&rendered, cause) {
                (_, Some(refusal::TIMED_OUT)) | (Err(AppError::RenderTimedOut(_)), _) => {
                    RenderOutcome::TimedOut
                }
                (_, Some(_)) => RenderOutcome::WorkerDied,
                (Ok(_), None) => RenderOutcome::Rendered,
                (Err(AppError::RenderBusy(_)), _) => RenderOutcome::Busy,
                (Err(AppError::ImageUnrenderable(_)), _) => RenderOutcome::Unrenderable,
                (Err(AppError::ImageNotRendered(_)), _) => RenderOutcome::NotRendered,
                (Err(_), _) => RenderOutcome::Failed,
            };
            state.metrics.render_outcome(outcome, ran_for);
            rendered
        })
    };
    // The render's worker is killed at the same deadline: a request answers when its task has
    // given back the slot and the memory (at once, in the usual case), or a moment later.
    match tokio::time::timeout_at(deadline + AFTER_THE_KILL, task).await {
        Ok(Ok(rendered)) => rendered,
        Ok(Err(e)) => Err(AppError::Internal(format!("the render's task: {e}"))),
        Err(_) => {
            tracing::warn!(
                file.id = %file.id,
                variant = %variant.name,
                timeout_secs = secs,
                "a rendition was not ready in time: its worker is killed"
            );
            Err(AppError::RenderTimedOut(secs))
        }
    }
}

/// Renders `variant` of `file` into `key` (the caller holds the key's lock and found no
/// rendition there); `ran_for` gets the render's own time when it ran.
async fn render_and_store(
    state: &AppState,
    file: &FileHandle,
    variant: &Variant,
    key: &str,
    deadline: tokio::time::Instant,
    ran_for: &mut Option<std::time::Duration>,
    failed: &mut Option<&'static str>,
) -> Result<RenditionUrl, AppError> {
    let format = Format::of_content_type(&file.content_type)
        .ok_or(AppError::ImageNotRendered("a file that is not an image"))?;
    // The source is read whole into memory: bounded here, whatever a profile's max_size
    // allows (second read of issue 37: a profile taking 5 GB files would have read one whole).
    if u64::try_from(file.size).unwrap_or(u64::MAX) > MAX_RENDER_SOURCE_BYTES {
        return Err(AppError::ImageUnrenderable(format!(
            "the image is {} bytes; a render reads at most {MAX_RENDER_SOURCE_BYTES}",
            file.size
        )));
    }
    let slot = state
        .renders
        .try_slot()
        .ok_or(AppError::RenderBusy(SLOTS_TAKEN))?;
    crate::pause::point("render_slot_taken").await;
    // Memory: the source's bytes (it is read whole) before reading it, then what decoding and
    // resizing it will hold, estimated from its frame header before anything is decoded.
    let budget = state.renders.memory_budget();
    let source_bytes = u64::try_from(file.size).unwrap_or(u64::MAX);
    let too_big = |needs: u64| {
        AppError::ImageUnrenderable(format!(
            "rendering it needs about {} MiB; this server's renders may hold {} MiB (UPCOMMIT_RENDER_MEMORY_MIB)",
            needs.div_ceil(MIB),
            budget / MIB
        ))
    };
    if source_bytes.saturating_add(crate::render::budget::FIXED) > budget {
        return Err(too_big(
            source_bytes.saturating_add(crate::render::budget::FIXED),
        ));
    }
    let bounds = state
        .settings
        .profile(&file.profile)
        .map(|p| p.image_bounds)
        .unwrap_or_default();
    let limits = Limits {
        max_pixels: bounds.max_pixels,
    };
    let box_ = Dimensions {
        width: variant.width,
        height: variant.height,
    };
    let fit = variant.fit;
    let target = crate::render::Output {
        format: variant.format,
        quality: variant.quality,
    };
    let source = source_of(format)?;
    let read = |n: u64| async move {
        state
            .store
            .sniff(&file.key, n)
            .await?
            .filter(|s| s.head.etag == file.etag && s.first.len() as u64 == n)
            .map(|s| s.first)
            .ok_or_else(|| AppError::Internal("the file's object is not the recorded one".into()))
    };
    // The estimate from the source's first bytes, before reading (and holding) all of it: a
    // render that cannot have the memory now is told so without a download.
    let first_len = source_bytes.min(ESTIMATE_READ_BYTES);
    let first = read(first_len).await?;
    let whole = first_len == source_bytes;
    let (_, early) = estimate(format, &first, whole, box_, fit, variant.format, &limits)?;
    if source_bytes.saturating_add(early) > budget {
        return Err(too_big(source_bytes.saturating_add(early)));
    }
    let mut held = vec![state
        .renders
        .try_memory(source_bytes.saturating_add(early))
        .ok_or(AppError::RenderBusy(MEMORY_HELD))?];
    let bytes = if whole {
        first
    } else {
        drop(first);
        read(source_bytes).await?
    };
    // Again from the whole source (a frame header past the first bytes, the orientation).
    let (header, work) = estimate(format, &bytes, true, box_, fit, variant.format, &limits)?;
    if work > early {
        if source_bytes.saturating_add(work) > budget {
            return Err(too_big(source_bytes.saturating_add(work)));
        }
        held.push(
            state
                .renders
                .try_memory(work - early)
                .ok_or(AppError::RenderBusy(MEMORY_HELD))?,
        );
    }
    let orientation = header.map_or(image::Transform::UPRIGHT, |h| h.orientation);
    // What `held` reserved: the source and the larger of the two estimates.
    let reserved = source_bytes.saturating_add(work.max(early));
    crate::pause::point("render_memory_held").await;
    let started = Instant::now();
    let job = crate::jail::Job {
        source,
        orientation,
        box_,
        fit,
        out: target,
        limits,
    };
    // Past the deadline before a worker has it (a slow store): no worker is started and
    // killed for nothing, and the file is not blamed.
    if tokio::time::Instant::now() >= deadline {
        return Err(AppError::RenderTimedOut(
            state.settings.uploads.render_timeout_secs,
        ));
    }
    // In a worker of its own, killed at the deadline (issue 46); the slot and the memory are
    // given back when it has answered, died or been killed and reaped.
    let handed_at = tokio::time::Instant::now();
    let outcome = state
        .render_workers
        .render(&job, &bytes, reserved, deadline)
        .await;
    drop((slot, held, bytes));
    *ran_for = Some(started.elapsed());
    let rendered = match outcome {
        Outcome::Answered(r) => r,
        Outcome::KilledAtLimit => {
            // A strike against the file only when its worker had (nearly) the whole limit:
            // one that started late (behind another render of the key, after a slow store)
            // and ran out is not the file's doing (outside review of issue 46).
            let limit = std::time::Duration::from_secs(state.settings.uploads.render_timeout_secs);
            if deadline.saturating_duration_since(handed_at) >= limit.mul_f64(0.9) {
                *failed = Some(refusal::TIMED_OUT);
            }
            return Err(AppError::RenderTimedOut(
                state.settings.uploads.render_timeout_secs,
            ));
        }
        Outcome::TimedOut => {
            return Err(AppError::RenderTimedOut(
                state.settings.uploads.render_timeout_secs,
            ));
        }
        Outcome::Died(death) => {
            *failed = Some(death.as_str());
            return Err(AppError::ImageUnrenderable(format!(
                "rendering it ended its worker ({}); this variant of this file is refused from now on",
                death.as_str()
            )));
        }
        Outcome::Unavailable(why) => {
            tracing::error!(error = %why, "no render worker");
            return Err(AppError::RenderBusy("no render worker could be started"));
        }
    };
    let rendered = match rendered {
        Ok(r) => r,
        Err(RenderError::Corrupt(why)) => return Err(AppError::ImageUnrenderable(why)),
        Err(e @ RenderError::TooManyPixels { .. }) => {
            return Err(AppError::ImageUnrenderable(e.to_string()))
        }
        Err(RenderError::Unsupported(what)) => return Err(AppError::ImageNotRendered(what)),
        // Inside a worker, a renderer's own failure is what the file drove it to (an
        // encoder's allocation refused at the memory limit): the file's, not a 500.
        Err(RenderError::Internal(why)) => {
            tracing::warn!(file.id = %file.id, variant = %variant.name, error = %why, "a render failed inside its worker");
            return Err(AppError::ImageUnrenderable(why));
        }
    };
    tracing::info!(
        variant = %variant.name,
        duration_ms = started.elapsed().as_millis() as u64,
        size_bytes = rendered.bytes.len(),
        "rendered"
    );
    let metadata = [
        ("width", rendered.width.to_string()),
        ("height", rendered.height.to_string()),
        ("source-etag", file.etag.trim_matches('"').to_owned()),
    ];
    let outcome = state
        .store
        .put_new_object(&NewObject {
            key,
            body: &rendered.bytes,
            content_type: rendered.content_type,
            metadata: &metadata,
        })
        .await?;
    if outcome == PutOutcome::AlreadyThere {
        // Another replica wrote it first: that one is answered.
        if let Some(h) = state.store.head(key).await? {
            let k = seen(state, key, h.size, &h.metadata);
            return answer(state, variant, key, k, true).await;
        }
    }
    let meta = metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    let k = seen(state, key, rendered.bytes.len() as i64, &meta);
    answer(state, variant, key, k, false).await
}

/// The rendition at `key` as the store holds it (its size, and its dimensions from the
/// metadata written with it), remembered as seen now.
fn seen(
    state: &AppState,
    key: &str,
    size: i64,
    metadata: &std::collections::HashMap<String, String>,
) -> Known {
    let dim = |k: &str| {
        metadata
            .get(k)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let k = Known {
        size,
        width: dim("width"),
        height: dim("height"),
    };
    state.renders.remember(key, k);
    k
}

async fn answer(
    state: &AppState,
    variant: &Variant,
    key: &str,
    k: Known,
    cached: bool,
) -> Result<RenditionUrl, AppError> {
    let content_type = variant.format.content_type();
    let expires_in = state.settings.uploads.download_expiry_secs;
    let url = state
        .store
        .presign_get(key, content_type, "inline", expires_in)
        .await?;
    Ok(RenditionUrl {
        variant: variant.name.clone(),
        url,
        width: k.width,
        height: k.height,
        content_type,
        size: k.size,
        expires_in,
        cached,
    })
}

/// The renderer's name for a source of `format`, or why it is not rendered.
fn source_of(format: Format) -> Result<Source, AppError> {
    Ok(match format {
        Format::Jpeg => Source::Jpeg,
        Format::Png => Source::Png,
        Format::Gif => Source::Gif,
        Format::Webp => Source::Webp,
        Format::Heic if upcommit_heif::can_decode(upcommit_heif::Codec::Hevc) => Source::Heif,
        Format::Avif if upcommit_heif::can_decode(upcommit_heif::Codec::Av1) => Source::Heif,
        _ => return Err(AppError::ImageNotRendered("this image format")),
    })
}

/// The first bytes of a source read to estimate its render before reading all of it: past a
/// camera's EXIF and ICC segments to the frame header, in the usual case.
const ESTIMATE_READ_BYTES: u64 = 256 * 1024;

/// The source's header (when `bytes` hold it) and the memory its render holds besides the
/// source's own bytes (`render::budget`); refused when it has more pixels than `limits` allow.
/// A header that cannot be read is the decoder's to refuse (as corrupt): it holds no more than
/// the fixed allowance before it does.
fn estimate(
    format: Format,
    bytes: &[u8],
    complete: bool,
    box_: Dimensions,
    fit: crate::domain::variants::Fit,
    output: crate::domain::variants::OutputFormat,
    limits: &Limits,
) -> Result<(Option<image::Header>, u64), AppError> {
    let header = match image::read_header(format, bytes, complete) {
        Parsed::Found(h) => Some(h),
        _ => None,
    };
    let orientation = header.map_or(image::Transform::UPRIGHT, |h| h.orientation);
    let unrenderable = |e: RenderError| AppError::ImageUnrenderable(e.to_string());
    if let Some(h) = header {
        limits.check_pixels(h.stored).map_err(unrenderable)?;
    }
    if format == Format::Jpeg && complete {
        let scans = image::jpeg_scan_count(bytes);
        if scans > crate::render::MAX_JPEG_SCANS {
            return Err(AppError::ImageUnrenderable(format!(
                "a JPEG of {scans} scans; a render reads at most {}",
                crate::render::MAX_JPEG_SCANS
            )));
        }
    }
    let frame = image::jpeg_frame(bytes);
    let stored = match (&frame, header) {
        (Some(f), _) if format == Format::Jpeg => Some(Dimensions {
            width: f.width,
            height: f.height,
        }),
        (_, Some(h)) => Some(h.stored),
        _ => None,
    };
    let extra = stored.map_or(0, |d| {
        crate::render::budget::output_bytes(d, orientation, box_, fit, output)
    });
    let work = match (format, frame, header) {
        (Format::Jpeg, Some(frame), _) => {
            limits
                .check_pixels(Dimensions {
                    width: frame.width,
                    height: frame.height,
                })
                .map_err(unrenderable)?;
            // CMYK, or an ICC profile or Adobe segment (RGB-stored): perhaps through pixels.
            let colour = image::jpeg_colour(bytes);
            let pixels = if frame.sampling.len() == 4 || colour.icc.is_some() || colour.adobe {
                crate::render::budget::jpeg_pixels_bytes(&frame, orientation, box_, fit)
            } else {
                0
            };
            // Whole, its scans are counted (a sequential JPEG of several holds every
            // coefficient); from the first bytes, a progressive frame says so already.
            let scans = if complete {
                image::jpeg_image_scans(bytes)
            } else {
                1
            };
            crate::render::budget::jpeg_bytes_of_scans(&frame, scans, orientation, box_, fit)
                + pixels
        }
        (Format::Png, _, Some(h)) => {
            crate::render::budget::png_bytes(h.stored, orientation, box_, fit).saturating_add(
                crate::render::budget::png_inflated_bytes(image::png_compressed_chunk_bytes(bytes)),
            )
        }
        (Format::Gif, _, Some(h)) => {
            crate::render::budget::gif_bytes(h.stored, orientation, box_, fit)
        }
        // Decoded whole to RGBA, as a PNG is.
        (Format::Webp, _, Some(h)) => {
            crate::render::budget::png_bytes(h.stored, orientation, box_, fit)
        }
        (Format::Heic | Format::Avif, _, Some(h)) => {
            // Whole, the file's coded images are held to their sizes before any decoding, and
            // what they take in all (a grid's tiles, an alpha plane) is counted.
            let decoded = if complete {
                let work = image::heif_work(bytes)
                    .map_err(|why| AppError::ImageUnrenderable(why.to_string()))?;
                limits.check_pixels(work.largest).map_err(unrenderable)?;
                work.pixels
            } else {
                h.stored.pixels()
            };
            crate::render::budget::heif_bytes(h.stored, orientation, box_, fit)
                + decoded.saturating_sub(h.stored.pixels()).saturating_mul(4)
        }
        _ => crate::render::budget::FIXED,
    };
    Ok((header, work + extra))
}

/// How long past its deadline a request waits for its render's task to give its worker, slot
/// and memory back (the worker is killed at the deadline; reaping it takes milliseconds).
const AFTER_THE_KILL: std::time::Duration = std::time::Duration::from_secs(2);

/// Tries an eager render this many times when every slot (or the memory) is taken.
const EAGER_ATTEMPTS: u32 = 3;

/// Renders `file`'s eager variants (`eager = true`) in the background, after its commit has
/// answered: never in the commit's answer path. Each variant is rendered as a request would
/// render it (cache, slots, memory, single flight); a busy replica is asked again a second
/// later, twice at most, then the first view renders it. Failures are logged, never raised.
pub fn render_eagerly(state: &AppState, file: &FileHandle) {
    let eager: Vec<String> = state
        .settings
        .profile(&file.profile)
        .map(|p| {
            p.variants
                .iter()
                .filter(|v| v.eager)
                .map(|v| v.name.clone())
                .collect()
        })
        .unwrap_or_default();
    let renderable =
        Format::of_content_type(&file.content_type).is_some_and(|f| source_of(f).is_ok());
    if eager.is_empty() || !renderable {
        return;
    }
    let (state, file) = (state.clone(), file.clone());
    tokio::spawn(async move {
        let metrics = state.metrics.clone();
        crate::state::supervise::catching("eager_render", Some(&metrics), async {
            for name in eager {
                for attempt in 1..=EAGER_ATTEMPTS {
                    match rendition(&state, &file, &name).await {
                        Ok(r) => {
                            tracing::info!(file.id = %file.id, variant = %name, cached = r.cached, "eager rendition ready");
                            break;
                        }
                        Err(AppError::RenderBusy(_)) if attempt < EAGER_ATTEMPTS => {
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                        Err(AppError::RenderTimedOut(_)) => {
                            tracing::info!(file.id = %file.id, variant = %name, "eager render past the time limit: its worker was stopped; the first view tries again");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(file.id = %file.id, variant = %name, error.code = e.code(), error = %e, "eager render not done: the first view renders it");
                            break;
                        }
                    }
                }
            }
        })
        .await;
    });
}

/// Removes every version (and delete marker) of every rendition of `file`: what a file's
/// deletion does after its object is gone, so that no rendition stays reachable until the
/// cache's rule would expire it. Returns how many versions went.
pub async fn delete_all(
    store: &dyn crate::storage::ObjectStore,
    file: &crate::domain::ids::FileId,
) -> Result<u64, crate::storage::StoreError> {
    let prefix = crate::domain::variants::file_prefix(file);
    let mut doomed: Vec<(String, Option<String>)> = Vec::new();
    let mut from = None;
    loop {
        let page = store.list_versions(&prefix, from.take()).await?;
        doomed.extend(
            page.versions
                .into_iter()
                .filter(|v| v.key.starts_with(&prefix))
                .map(|v| (v.key, v.version_id)),
        );
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    for batch in doomed.chunks(crate::storage::DELETE_BATCH) {
        let refused = store.delete_versions(batch).await?;
        if let Some(f) = refused.first() {
            return Err(crate::storage::StoreError::Other(format!(
                "{}: {}",
                f.key, f.reason
            )));
        }
    }
    Ok(doomed.len() as u64)
}

//! The size a HEIF item's coded image really has, read from its parameter sets rather than from
//! the `ispe` box beside it: HEVC's sequence parameter sets (in `hvcC` and in the item's data)
//! and AV1's sequence headers (in `av1C` and in the item's data). The decoders (libde265,
//! dav1d) allocate for these sizes whatever `ispe` says, so a file whose `ispe` is smaller than
//! its coded image is refused before anything decodes it.

use super::bits::{unescape, Bits};
use super::Dimensions;

/// HEVC's NAL unit type of a sequence parameter set.
const HEVC_SPS: u8 = 33;
/// AV1's OBU type of a sequence header.
const AV1_SEQUENCE_HEADER: u8 = 1;
/// AV1's OBU types of a frame header, and of a frame (its header and tiles).
const AV1_FRAME_HEADER: u8 = 3;
const AV1_FRAME: u8 = 6;

/// What a coded item's parameter sets say: the largest picture any of them declares, the
/// largest a frame could still be made to decode to (AV1's frame headers may override the
/// sequence header's size within its field widths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coded {
    pub largest: Option<Dimensions>,
    pub bound: Option<Dimensions>,
    /// Pictures begun in the item's data: HEVC slices that start one, AV1 frames and frame
    /// headers.
    pub pictures: u32,
}

/// The length prefix of an HEVC item's NAL units as libheif reads them: 4 bytes, whatever
/// `hvcC`'s `lengthSizeMinusOne` says (its libde265 plugin reads 4), so they are walked here as
/// the decoder will see them.
const NAL_LENGTH: usize = 4;

fn widest(a: Option<Dimensions>, d: Dimensions) -> Option<Dimensions> {
    Some(match a {
        Some(l) => Dimensions {
            width: l.width.max(d.width),
            height: l.height.max(d.height),
        },
        None => d,
    })
}

impl Coded {
    fn add(&mut self, declared: Dimensions, bound: Dimensions) {
        self.largest = widest(self.largest, declared);
        self.bound = widest(self.bound, bound);
    }
}

/// The picture size of an HEVC sequence parameter set (`nal`: the NAL unit, its 2-byte header
/// first), before its conformance window crops it.
pub fn hevc_sps(nal: &[u8]) -> Option<Dimensions> {
    let rbsp = unescape(nal.get(2..)?);
    let mut r = Bits::new(&rbsp);
    r.skip(4)?; // sps_video_parameter_set_id
    let sub_layers = r.bits(3)? as usize; // sps_max_sub_layers_minus1
    r.skip(1)?; // sps_temporal_id_nesting_flag
                // profile_tier_level(1, sps_max_sub_layers_minus1): the general part is 96 bits.
    r.skip(96)?;
    let mut present = [(false, false); 8];
    for p in present.iter_mut().take(sub_layers) {
        *p = (r.bit()? == 1, r.bit()? == 1);
    }
    if sub_layers > 0 {
        r.skip(2 * (8 - sub_layers))?; // reserved_zero_2bits
    }
    for &(profile, level) in present.iter().take(sub_layers) {
        if profile {
            r.skip(88)?;
        }
        if level {
            r.skip(8)?;
        }
    }
    r.ue()?; // sps_seq_parameter_set_id
    if r.ue()? == 3 {
        r.skip(1)?; // separate_colour_plane_flag
    }
    let width = r.ue()?;
    let height = r.ue()?;
    Some(Dimensions { width, height })
}

/// The frame size an AV1 sequence header (`payload`: the OBU's payload) declares, and the
/// largest a frame of it can decode to: the same with the reduced still-picture header, else
/// what its frame size fields can hold (a frame header may override the size; dav1d holds it
/// to nothing smaller).
pub fn av1_sequence_header(payload: &[u8]) -> Option<(Dimensions, Dimensions)> {
    let mut r = Bits::new(payload);
    r.skip(3)?; // seq_profile
    r.skip(1)?; // still_picture
    let reduced = r.bit()? == 1;
    if reduced {
        // reduced_still_picture_header
        r.skip(5)?; // seq_level_idx[0]
    } else {
        let timing_info = r.bit()? == 1;
        let mut decoder_model = false;
        let mut buffer_delay_bits = 0;
        if timing_info {
            r.skip(64)?; // num_units_in_display_tick, time_scale
            if r.bit()? == 1 {
                r.uvlc()?; // num_ticks_per_picture_minus_1
            }
            decoder_model = r.bit()? == 1;
            if decoder_model {
                buffer_delay_bits = r.bits(5)? as usize + 1;
                r.skip(32 + 5 + 5)?;
            }
        }
        let initial_display_delay = r.bit()? == 1;
        let operating_points = r.bits(5)? + 1;
        for _ in 0..operating_points {
            r.skip(12)?; // operating_point_idc
            if r.bits(5)? > 7 {
                r.skip(1)?; // seq_tier
            }
            if decoder_model && r.bit()? == 1 {
                r.skip(2 * buffer_delay_bits + 1)?;
            }
            if initial_display_delay && r.bit()? == 1 {
                r.skip(4)?;
            }
        }
    }
    let width_bits = r.bits(4)? + 1;
    let height_bits = r.bits(4)? + 1;
    let width = u64::from(r.bits(width_bits)?) + 1;
    let height = u64::from(r.bits(height_bits)?) + 1;
    let declared = Dimensions {
        width: u32::try_from(width).ok()?,
        height: u32::try_from(height).ok()?,
    };
    let bound = if reduced {
        declared
    } else {
        Dimensions {
            width: u32::try_from(1u64 << width_bits).ok()?,
            height: u32::try_from(1u64 << height_bits).ok()?,
        }
    };
    Some((declared, bound))
}

/// The SPSs of an `hvcC` box's body: every NAL unit of its arrays that is one.
pub fn hvcc(body: &[u8]) -> Result<Coded, &'static str> {
    let short = "an hvcC box cut short";
    let mut coded = Coded::default();
    let arrays = *body.get(22).ok_or(short)?;
    let mut at = 23;
    for _ in 0..arrays {
        // The array's NAL type aside: the decoder goes by each unit's own header.
        let count = u16::from_be_bytes([
            *body.get(at + 1).ok_or(short)?,
            *body.get(at + 2).ok_or(short)?,
        ]);
        at += 3;
        for _ in 0..count {
            let len = usize::from(u16::from_be_bytes([
                *body.get(at).ok_or(short)?,
                *body.get(at + 1).ok_or(short)?,
            ]));
            let nal = body.get(at + 2..at + 2 + len).ok_or(short)?;
            at += 2 + len;
            if nal_type(nal) == Some(HEVC_SPS) {
                let size = hevc_sps(nal).ok_or("an HEVC parameter set that cannot be read")?;
                coded.add(size, size);
            }
        }
    }
    Ok(coded)
}

fn nal_type(nal: &[u8]) -> Option<u8> {
    nal.first().map(|b| (b >> 1) & 0x3F)
}

/// The sequence headers of an `av1C` box's body (its `configOBUs`, after 4 bytes).
pub fn av1c(body: &[u8]) -> Result<Coded, &'static str> {
    if body.len() < 4 {
        return Err("an av1C box cut short");
    }
    let mut coded = Coded::default();
    av1_obus(&body[4..], &mut coded)?;
    Ok(coded)
}

/// Adds the SPSs among the NAL units of an HEVC item's data (each after a big-endian length of
/// [`NAL_LENGTH`] bytes).
pub fn hevc_data(data: &[u8], coded: &mut Coded) -> Result<(), &'static str> {
    let mut at = 0;
    while at < data.len() {
        let prefix = data
            .get(at..at + NAL_LENGTH)
            .ok_or("an HEVC NAL unit's length cut short")?;
        let len = prefix
            .iter()
            .fold(0usize, |v, b| (v << 8) | usize::from(*b));
        at += NAL_LENGTH;
        let nal = data
            .get(at..at.saturating_add(len))
            .ok_or("an HEVC NAL unit longer than its item")?;
        at += len;
        match nal_type(nal) {
            Some(HEVC_SPS) => {
                let size = hevc_sps(nal).ok_or("an HEVC parameter set that cannot be read")?;
                coded.add(size, size);
            }
            // A slice (VCL types 0–31) with first_slice_segment_in_pic_flag set.
            Some(0..=31) if nal.get(2).is_some_and(|b| b & 0x80 != 0) => {
                coded.pictures = coded.pictures.saturating_add(1);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Adds the sequence headers among AV1 OBUs (`configOBUs` or an item's data).
pub fn av1_obus(data: &[u8], coded: &mut Coded) -> Result<(), &'static str> {
    let mut at = 0;
    while at < data.len() {
        let header = data[at];
        let kind = (header >> 3) & 0xF;
        let extension = header & 4 != 0;
        let has_size = header & 2 != 0;
        at += 1 + usize::from(extension);
        let len = if has_size {
            let (len, n) =
                leb128(data.get(at..).unwrap_or_default()).ok_or("an AV1 OBU's size cut short")?;
            at += n;
            len
        } else {
            // Without a size, the OBU runs to the end.
            data.len().saturating_sub(at)
        };
        let payload = data
            .get(at..at.saturating_add(len))
            .ok_or("an AV1 OBU longer than its item")?;
        at += len;
        match kind {
            AV1_SEQUENCE_HEADER => {
                let (declared, bound) = av1_sequence_header(payload)
                    .ok_or("an AV1 sequence header that cannot be read")?;
                coded.add(declared, bound);
            }
            AV1_FRAME_HEADER | AV1_FRAME => coded.pictures = coded.pictures.saturating_add(1),
            _ => {}
        }
    }
    Ok(())
}

/// A LEB128 number (at most 8 bytes) and how many bytes it took.
fn leb128(b: &[u8]) -> Option<(usize, usize)> {
    let mut v: u64 = 0;
    for (i, byte) in b.iter().take(8).enumerate() {
        v |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((usize::try_from(v).ok()?, i + 1));
        }
    }
    None
}

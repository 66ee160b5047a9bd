//! A bit reader for the parameter sets HEIF's coded images carry (HEVC's SPS, AV1's sequence
//! header): most significant bit first, `None` past the end, never a panic.

pub struct Bits<'a> {
    bytes: &'a [u8],
    /// The next bit's position.
    at: usize,
}

impl<'a> Bits<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Bits { bytes, at: 0 }
    }

    pub fn bit(&mut self) -> Option<u32> {
        let byte = *self.bytes.get(self.at / 8)?;
        let bit = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Some(u32::from(bit))
    }

    /// `n` bits (at most 32) as an unsigned number.
    pub fn bits(&mut self, n: u32) -> Option<u32> {
        debug_assert!(n <= 32);
        let mut v: u64 = 0;
        for _ in 0..n {
            v = (v << 1) | u64::from(self.bit()?);
        }
        u32::try_from(v).ok()
    }

    pub fn skip(&mut self, n: usize) -> Option<()> {
        let to = self.at.checked_add(n)?;
        (to <= self.bytes.len() * 8).then(|| self.at = to)
    }

    /// An Exp-Golomb code, H.265's ue(v): `None` past 32 leading zeros.
    pub fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let rest = self.bits(zeros)?;
        u32::try_from((1u64 << zeros) - 1 + u64::from(rest)).ok()
    }

    /// AV1's uvlc(): leading zeros then as many bits; 32 or more zeros mean 2³² − 1.
    pub fn uvlc(&mut self) -> Option<u32> {
        let mut zeros = 0u32;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros >= 32 {
                return Some(u32::MAX);
            }
        }
        let rest = self.bits(zeros)?;
        u32::try_from((1u64 << zeros) - 1 + u64::from(rest)).ok()
    }
}

/// An HEVC NAL unit's payload with its emulation prevention bytes (the 3 of 0x000003) taken out.
pub fn unescape(nal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nal.len());
    let mut zeros = 0;
    for &b in nal {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

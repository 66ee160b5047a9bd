//! Bytes that libheif 1.15 and this reader would read two ways (a second outside review of
//! issue 37): `iloc` fields of a width libheif skips, `infe` versions it reads as another, a
//! reference box with bytes after its IDs (libheif reads references back to back), an item ID
//! given by two `infe` of different versions; and alpha planes libheif decodes beside a grid's
//! tiles. Each read differently would let a small file decode far more than was checked.

use super::heif_tests::{bmff, full, grid, Heif, Item};
use super::*;

fn one() -> Heif {
    Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))])
}

/// Refused by the commit's read, the whole file's and the render's check.
fn refused(file: &[u8]) -> bool {
    matches!(read_header(Format::Heic, file, true), Parsed::Invalid(_))
        && matches!(read_header(Format::Heic, file, false), Parsed::Invalid(_))
        && heif_work(file).is_err()
}

fn alpha(id: u16, size: (u32, u32)) -> Item {
    let mut a = Item::hevc(id, size, size);
    a.props.push(bmff(
        b"auxC",
        &full(0, b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha\0"),
    ));
    a
}

#[test]
fn iloc_offsets_two_bytes_wide_are_refused() {
    // libheif 1.15 reads only 4- and 8-byte offsets, lengths and base offsets.
    let mut heif = one();
    heif.iloc_offset_size = 2;
    assert!(refused(&heif.build()));
}

/// An `infe` of `version` for item `id` of type `kind` (versions 0 and 1 have no type).
fn infe(version: u8, id: u16, kind: &[u8; 4]) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.extend([0, 0]); // protection index
    if version >= 2 {
        v.extend(kind);
    }
    v.push(0); // name
    bmff(b"infe", &full(version, &v))
}

#[test]
fn an_infe_of_a_version_past_three_is_refused() {
    // libheif 1.15 reads version 4 as 3; the entry must not be skipped here.
    for version in [4, 5, 255] {
        let mut heif = one();
        heif.extra_infe.push(infe(version, 9, b"grid"));
        assert!(refused(&heif.build()), "version {version}");
    }
}

#[test]
fn an_item_given_by_two_infe_of_any_versions_is_refused() {
    // libheif keeps an item's first `infe`, whatever its version.
    for version in [0, 1, 2] {
        let mut heif = one();
        heif.extra_infe.push(infe(version, 1, b"grid"));
        assert!(refused(&heif.build()), "version {version}");
    }
    let mut heif = one();
    heif.extra_infe.push(infe(1, 7, b"hvc1"));
    assert!(
        matches!(
            read_header(Format::Heic, &heif.build(), true),
            Parsed::Found(_)
        ),
        "an item of its own under version 1 is not an image, and not refused"
    );
}

#[test]
fn iinf_whose_count_is_not_its_entries_is_refused() {
    let file = one().build();
    let at = file.windows(4).position(|w| w == b"iinf").expect("iinf") + 8;
    for count in [0u16, 2] {
        let mut f = file.clone();
        f[at..at + 2].copy_from_slice(&count.to_be_bytes());
        assert!(refused(&f), "count {count}");
    }
}

#[test]
fn a_reference_box_with_bytes_after_its_ids_is_refused() {
    // libheif reads references back to back: padding would hide a reference from this reader.
    for pad in [1, 4, 14] {
        let mut heif = one();
        heif.items.push(Item::hevc(2, (64, 64), (64, 64)));
        heif.refs.push((*b"thmb", 2, vec![1]));
        heif.iref_pad = pad;
        assert!(refused(&heif.build()), "pad {pad}");
    }
}

#[test]
fn a_uuid_reference_box_is_refused() {
    let mut heif = one();
    heif.items.push(Item::hevc(2, (64, 64), (64, 64)));
    heif.refs.push((*b"uuid", 2, vec![1]));
    assert!(refused(&heif.build()));
}

#[test]
fn an_alpha_plane_of_a_grid_tile_or_of_the_grid_is_counted() {
    let base = 1000 * 1000 + 4 * 512 * 512;
    let mut heif = grid((512, 512));
    heif.items.push(alpha(20, (512, 512)));
    heif.refs.push((*b"auxl", 20, vec![3]));
    assert_eq!(
        heif_work(&heif.build()).expect("work").pixels,
        base + 512 * 512
    );

    let mut heif = grid((512, 512));
    heif.items.push(alpha(20, (1000, 1000)));
    heif.refs.push((*b"auxl", 20, vec![10]));
    assert_eq!(
        heif_work(&heif.build()).expect("work").pixels,
        base + 1000 * 1000
    );
}

#[test]
fn an_image_item_holding_more_than_one_picture_is_refused() {
    use super::heif_tests::{hevc_data, hevc_slice, obu};
    let mut heif = one();
    heif.items[0].data = hevc_data(&[hevc_slice(), hevc_slice()]);
    assert!(heif_work(&heif.build()).is_err());
    // A second slice of the same picture (first_slice_segment_in_pic_flag clear) is not one.
    let mut second = hevc_slice();
    second[2] &= 0x7F;
    heif.items[0].data = hevc_data(&[hevc_slice(), second]);
    assert!(heif_work(&heif.build()).is_ok());

    let mut avif = Heif::new(b"avif", vec![Item::av1(1, (64, 64), (64, 64))]);
    assert!(heif_work(&avif.build()).is_ok());
    avif.items[0].data.extend(obu(6, &[0x10, 0x20]));
    assert!(heif_work(&avif.build()).is_err());
}

#[test]
fn two_references_of_one_type_from_one_item_are_refused() {
    // libheif takes an item's first `dimg` (or `auxl`, `thmb`): a second would be read here.
    let mut heif = grid((512, 512));
    heif.refs.push((*b"dimg", 10, vec![1, 2, 3, 4]));
    assert!(refused(&heif.build()));
    let mut heif = one();
    heif.items.push(Item::hevc(2, (64, 64), (64, 64)));
    heif.refs.push((*b"thmb", 2, vec![1]));
    heif.refs.push((*b"cdsc", 2, vec![1]));
    assert!(matches!(
        read_header(Format::Heic, &heif.build(), true),
        Parsed::Found(_)
    ));
    heif.refs.push((*b"thmb", 2, vec![1]));
    assert!(refused(&heif.build()));
}

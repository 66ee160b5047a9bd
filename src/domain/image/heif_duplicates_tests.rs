//! A HEIF file that says one thing twice: two `meta` boxes, two of one box in `meta`, one item
//! listed twice, one image with two sizes. libheif 1.15 and this reader would pick different
//! ones (libheif the last `meta` but the first `iloc`, `iinf` and `pitm` in it, the first
//! `iloc` entry of an item), so what is checked would not be what is decoded: each is refused.

use super::heif_tests::{bmff, Heif, Item};
use super::*;

fn one() -> Heif {
    Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))])
}

/// Refused for saying something twice, by the commit's read, the whole file's and the render's.
fn refused(file: &[u8]) -> bool {
    let twice = |why: &str| why.contains("two") || why.contains("twice");
    let read = |complete| match read_header(Format::Heic, file, complete) {
        Parsed::Invalid(why) => twice(why),
        _ => false,
    };
    read(true) && read(false) && heif_work(file).is_err_and(twice)
}

/// Where the top-level box of type `kind` starts and ends.
fn top_level(file: &[u8], kind: &[u8; 4]) -> (usize, usize) {
    let mut at = 0;
    loop {
        let size = u32::from_be_bytes(file[at..at + 4].try_into().expect("size")) as usize;
        if &file[at + 4..at + 8] == kind {
            return (at, at + size);
        }
        at += size;
    }
}

#[test]
fn the_builder_s_file_is_read_once_nothing_is_said_twice() {
    assert!(matches!(
        read_header(Format::Heic, &one().build(), true),
        Parsed::Found(_)
    ));
}

#[test]
fn a_second_meta_box_before_the_media_data_is_refused() {
    let file = one().build();
    let (start, end) = top_level(&file, b"meta");
    let twice = [&file[..end], &file[start..end], &file[end..]].concat();
    assert!(refused(&twice));
}

#[test]
fn a_second_meta_box_after_the_media_data_is_refused_once_the_file_is_whole() {
    let file = one().build();
    let (start, end) = top_level(&file, b"meta");
    let after = [&file[..], &file[start..end]].concat();
    assert_eq!(heif_work(&after), Err("two meta boxes"));
    // The commit's first bytes do not reach it; the render's check does.
    let (_, mdat_end) = top_level(&after, b"mdat");
    assert!(matches!(
        read_header(Format::Heic, &after[..mdat_end], false),
        Parsed::Found(_)
    ));
}

#[test]
fn media_data_running_to_the_end_of_the_file_is_read() {
    // `mdat` of size 0: "to the end of the file", as a last box may be.
    let mut file = one().build();
    let (start, _) = top_level(&file, b"mdat");
    file[start..start + 4].copy_from_slice(&[0; 4]);
    assert!(matches!(
        read_header(Format::Heic, &file, true),
        Parsed::Found(_)
    ));
    assert!(heif_work(&file).is_ok());
}

#[test]
fn two_of_any_box_that_describes_the_items_are_refused() {
    for kind in [
        b"pitm", b"iinf", b"iref", b"iloc", b"idat", b"iprp", b"ipco", b"ipma",
    ] {
        let mut heif = one();
        heif.items.push(Item::hevc(2, (64, 64), (64, 64)));
        heif.refs.push((*b"thmb", 2, vec![1]));
        heif.twice.push(*kind);
        assert!(
            refused(&heif.build()),
            "two {}",
            String::from_utf8_lossy(kind)
        );
    }
}

#[test]
fn an_item_located_or_associated_twice_is_refused() {
    for kind in [b"iloc", b"ipma"] {
        let mut heif = one();
        heif.twice_entry = Some(*kind);
        assert!(refused(&heif.build()), "{}", String::from_utf8_lossy(kind));
    }
}

#[test]
fn an_image_with_two_sizes_or_two_decoder_configurations_is_refused() {
    for second in [
        super::heif_tests::ispe(64, 64),
        super::heif_tests::ispe(6400, 6400),
        bmff(
            b"hvcC",
            &super::heif_tests::hvcc(&[super::heif_tests::hevc_sps(64, 64, 0)]),
        ),
    ] {
        let mut heif = one();
        heif.items[0].props.push(second);
        assert!(refused(&heif.build()));
    }
}

/// libheif 1.15 does not decode it as alpha (later versions may): counted, on the safe side.
#[test]
fn an_alpha_plane_named_by_the_avc_urn_is_counted() {
    let mut alpha = Item::hevc(2, (640, 480), (640, 480));
    alpha.props.push(bmff(
        b"auxC",
        &[&[0u8, 0, 0, 0][..], b"urn:mpeg:avc:2015:auxid:1\0"].concat(),
    ));
    let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64)), alpha]);
    heif.refs.push((*b"auxl", 2, vec![1]));
    let work = heif_work(&heif.build()).expect("work");
    assert_eq!(work.pixels, 64 * 64 + 640 * 480);
    assert_eq!(
        work.largest,
        Dimensions {
            width: 640,
            height: 480
        }
    );
}

//! What decoding takes, counted as libheif 1.15 decodes (a third outside review of issue 37):
//! an alpha plane's own alpha plane, recursively; every reference of a grid to a tile; and the
//! check's own work bounded — extents never name one byte twice (so no item's data, nor all of
//! them together, outgrows the file), each item is parsed once however often it is referenced,
//! and an image of more parts than any grid has is refused.

use super::heif_tests::{bmff, full, grid, Heif, Item};
use super::*;

fn alpha(id: u16, size: (u32, u32)) -> Item {
    let mut a = Item::hevc(id, size, size);
    a.props.push(bmff(
        b"auxC",
        &full(0, b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha\0"),
    ));
    a
}

/// A 640 × 480 image whose alpha plane has an alpha plane, and so on: `depth` planes.
fn alpha_chain(depth: u16) -> Heif {
    let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (640, 480), (640, 480))]);
    for k in 1..=depth {
        heif.items.push(alpha(k + 1, (640, 480)));
        heif.refs.push((*b"auxl", k + 1, vec![k]));
    }
    heif
}

#[test]
fn an_alpha_plane_s_own_alpha_plane_is_counted_and_a_deep_chain_refused() {
    // libheif 1.15 decodes the whole chain (the review's chain of 150 took 1.5 GB).
    for depth in [1u16, 2, 5, 7] {
        let work = heif_work(&alpha_chain(depth).build()).expect("work");
        assert_eq!(
            work.pixels,
            u64::from(depth + 1) * 640 * 480,
            "depth {depth}"
        );
    }
    for depth in [8u16, 40] {
        assert_eq!(
            heif_work(&alpha_chain(depth).build()),
            Err("images nested deeper than any encoder writes"),
            "depth {depth}"
        );
    }
}

#[test]
fn alpha_planes_that_refer_to_each_other_in_a_circle_are_refused() {
    let mut heif = alpha_chain(2);
    // Plane 3 is plane 2's alpha; plane 2 now also plane 3's.
    heif.refs.push((*b"auxl", 2, vec![3]));
    assert!(heif_work(&heif.build()).is_err());
}

#[test]
fn an_alpha_grid_s_tiles_and_their_alpha_planes_are_counted() {
    let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (1000, 1000), (1000, 1000))]);
    heif.items
        .push(Item::grid(10, 1, 2, (1000, 1000), (1000, 1000)));
    heif.items[1].props.push(bmff(
        b"auxC",
        &full(0, b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha\0"),
    ));
    heif.items.push(Item::hevc(11, (500, 1000), (512, 1024)));
    heif.items.push(Item::hevc(12, (500, 1000), (512, 1024)));
    heif.items.push(alpha(13, (500, 1000)));
    heif.refs.push((*b"dimg", 10, vec![11, 12]));
    heif.refs.push((*b"auxl", 10, vec![1]));
    heif.refs.push((*b"auxl", 13, vec![11]));
    let work = heif_work(&heif.build()).expect("work");
    assert_eq!(
        work.pixels,
        1000 * 1000 + 1000 * 1000 + 2 * 512 * 1024 + 500 * 1000
    );
}

#[test]
fn a_tile_referenced_twice_is_counted_twice() {
    let mut heif = grid((512, 512));
    heif.refs[0] = (*b"dimg", 10, vec![1, 1, 2, 2]);
    assert_eq!(
        heif_work(&heif.build()).expect("work").pixels,
        1000 * 1000 + 4 * 512 * 512
    );
}

#[test]
fn an_image_of_more_parts_than_any_grid_has_is_refused() {
    // 255 × 255 references to one tile whose alpha plane has its own: 195,076 pictures.
    let mut heif = Heif::new(
        b"heic",
        vec![
            Item::grid(10, 255, 255, (16, 16), (16, 16)),
            Item::hevc(1, (1, 1), (1, 1)),
            alpha(2, (1, 1)),
            alpha(3, (1, 1)),
        ],
    );
    heif.refs.push((*b"dimg", 10, vec![1; 255 * 255]));
    heif.refs.push((*b"auxl", 2, vec![1]));
    heif.refs.push((*b"auxl", 3, vec![2]));
    assert!(heif_work(&heif.build()).is_err());
    // Without the alpha planes: 65,026 pictures, counted.
    heif.refs.truncate(1);
    assert_eq!(
        heif_work(&heif.build()).expect("work").pixels,
        16 * 16 + 255 * 255
    );
}

const TWICE: &str = "item extents that name the same bytes twice";

#[test]
fn an_extent_listed_twice_is_refused_whatever_its_length() {
    for repeat in [2u16, 3, 1000] {
        let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))]);
        heif.extent_repeat = repeat;
        let file = heif.build();
        assert_eq!(heif_work(&file), Err(TWICE), "{repeat}");
        assert!(
            matches!(
                read_header(Format::Heic, &file, false),
                Parsed::Invalid(TWICE)
            ),
            "at commit too: {repeat}"
        );
    }
}

#[test]
fn two_items_located_on_the_same_bytes_are_refused() {
    let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))]);
    heif.items.push(Item::hevc(2, (64, 64), (64, 64)));
    heif.refs.push((*b"thmb", 2, vec![1]));
    let file = heif.build();
    assert!(heif_work(&file).is_ok());
    // iloc v1 body: version and flags (4), sizes (2), count (2), then entries of 16 bytes:
    // id (2), method (2), data reference (2), extents (2), offset (4), length (4).
    let body = file.windows(4).position(|w| w == b"iloc").expect("iloc") + 4;
    let (first, second) = (body + 8 + 8, body + 8 + 16 + 8);
    let mut same = file.clone();
    let offset = file[first..first + 4].to_vec();
    same[second..second + 4].copy_from_slice(&offset);
    assert_eq!(heif_work(&same), Err(TWICE));
    assert!(matches!(
        read_header(Format::Heic, &same, false),
        Parsed::Invalid(TWICE)
    ));
}

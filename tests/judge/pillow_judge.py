"""Pillow as the outside judge of upcommit's images (issue 37).

Pillow (and pillow-heif, for HEIC and AVIF) writes each fixture; the script uploads it as a
client does (presign, PUT to the presigned URL, commit) to a running server, checks the
handle's `image` against what Pillow says the displayed size is, asks for every variant,
downloads each rendition from its URL and judges it with Pillow: its format, its size, which
way is up (four coloured quadrants of the displayed image must be where they belong), its
colours (a CMYK source against Pillow's own conversion), its transparency, and that nothing of
the source's metadata (EXIF, GPS, XMP, ICC, comments) is left. Bounds are refused with their
codes, for good. One line per case; exit status 1 if any case failed.

Usage: pillow_judge.py BASE_URL TOKEN   (the server runs scripts/pillow_judge.sh's config)
"""

import io
import json
import sys
import urllib.error
import urllib.request

from PIL import Image, ImageCms, ImageOps
from PIL.PngImagePlugin import PngInfo

try:
    import pillow_heif

    pillow_heif.register_heif_opener()
    HEIF = True
except ImportError:  # reported as skipped cases, never as passes
    HEIF = False

BASE, TOKEN = sys.argv[1], sys.argv[2]
FAILED = []
RED, GREEN, BLUE, YELLOW = (220, 30, 30), (30, 200, 30), (30, 30, 220), (230, 220, 30)
QUADS = {"tl": RED, "tr": GREEN, "bl": BLUE, "br": YELLOW}
# Pillow's method turning a stored image upright, by EXIF orientation (ImageOps.exif_transpose).
UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# Its inverse: what a camera stores for a displayed image.
STORED = {**UPRIGHT, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}


def call(method, path, body=None):
    req = urllib.request.Request(
        BASE + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


def fetch(url):
    with urllib.request.urlopen(url) as r:
        return r.read(), r.headers.get("Content-Type")


def upload(profile, content_type, data, filename):
    status, p, _ = call(
        "POST",
        "/v1/uploads",
        {"profile": profile, "content_type": content_type, "size": len(data), "filename": filename},
    )
    assert status == 201, f"presign {status} {p}"
    headers = p.get("headers") or {"Content-Type": content_type}
    put = urllib.request.Request(p["url"], method="PUT", data=data, headers=headers)
    with urllib.request.urlopen(put) as r:
        assert r.status == 200, f"PUT {r.status}"
    return p["key"]


def commit(key):
    return call("POST", "/v1/files", {"key": key})


def displayed(w=120, h=80):
    """The displayed image: four coloured quadrants."""
    im = Image.new("RGB", (w, h))
    for (name, colour), (x, y) in zip(QUADS.items(), [(0, 0), (1, 0), (0, 1), (1, 1)]):
        im.paste(colour, (x * w // 2, y * h // 2, (x + 1) * w // 2, (y + 1) * h // 2))
    return im


def near(a, b, tol):
    return all(abs(int(x) - int(y)) <= tol for x, y in zip(a, b))


def quadrants_at(im, box):
    """The colours at the centres of the four quadrants of `box` (x0, y0, x1, y1) of `im`."""
    x0, y0, x1, y1 = box
    xs = (x0 + (x1 - x0) // 4, x0 + 3 * (x1 - x0) // 4)
    ys = (y0 + (y1 - y0) // 4, y0 + 3 * (y1 - y0) // 4)
    rgb = im.convert("RGB")
    return {
        "tl": rgb.getpixel((xs[0], ys[0])),
        "tr": rgb.getpixel((xs[1], ys[0])),
        "bl": rgb.getpixel((xs[0], ys[1])),
        "br": rgb.getpixel((xs[1], ys[1])),
    }


def no_metadata(im, data):
    """What of a source's metadata a rendition still carries (nothing, if all is well)."""
    left = [k for k in ("exif", "icc_profile", "xmp", "XML:com.adobe.xmp", "comment", "dpi") if im.info.get(k)]
    if len(im.getexif()):
        left.append(f"{len(im.getexif())} EXIF tags")
    # Long needles only: three random bytes would turn up in compressed data now and then.
    for needle in (b"Exif\x00\x00", b"ICC_PROFILE", b"adobe:ns:meta", b"judge-secret"):
        if needle in data:
            left.append(repr(needle))
    return left


# The variants scripts/pillow_judge.sh configures: name -> (box, fit, Pillow format).
VARIANTS = {
    "cover": ((60, 60), "cover", "JPEG"),
    "contain": ((100, 100), "contain", "JPEG"),
    "inside": ((60, 60), "inside", "JPEG"),
    "card": ((60, 60), "inside", "WEBP"),
    "small": ((60, 60), "inside", "AVIF"),
}


def expected_size(shown, box, fit):
    (w, h), (bw, bh) = shown, box
    if fit == "cover":
        s = max(bw / w, bh / h)
        if s >= 1:  # never enlarged: the largest centred part of the box's shape
            r = min(w / bw, h / bh)
            return (round(bw * r), round(bh * r))
        return (bw, bh)
    s = min(bw / w, bh / h)
    if s >= 1:  # inside and contain never enlarge
        return (w, h)
    rw, rh = max(1, round(w * s)), max(1, round(h * s))
    if fit == "inside":
        return (rw, rh)
    # contain: the box, but never past the source on either side (docs/images.md)
    return (max(min(bw, w), rw), max(min(bh, h), rh))


def case(name, fn):
    try:
        note = fn()
        print(f"PASS {name}: {note}")
    except AssertionError as e:
        FAILED.append(name)
        print(f"FAIL {name}: {e}")
    except Exception as e:  # a crash of the judge is a failure too
        FAILED.append(name)
        print(f"FAIL {name}: {type(e).__name__}: {e}")


def rendition(file_id, variant):
    status, body, headers = call("GET", f"/v1/files/{file_id}/variants/{variant}")
    assert status == 200, f"{variant}: {status} {body}"
    data, stored_type = fetch(body["url"])
    assert stored_type == body["content_type"], f"{variant}: stored {stored_type}, said {body['content_type']}"
    im = Image.open(io.BytesIO(data))
    im.load()
    assert im.size == (body["width"], body["height"]), f"{variant}: {im.size} vs {body}"
    assert body["size"] == len(data), f"{variant}: size {body['size']} vs {len(data)}"
    return im, data, body


def committed(profile, content_type, data, filename, shown):
    status, h, _ = commit(upload(profile, content_type, data, filename))
    assert status == 201, f"commit {status} {h}"
    assert h.get("image") == {"width": shown[0], "height": shown[1]}, f"image {h.get('image')} vs {shown}"
    return h["id"]


def judge_upright(file_id, shown, variants=("cover", "contain", "inside", "card")):
    notes = []
    for v in variants:
        box, fit, fmt = VARIANTS[v]
        im, data, _ = rendition(file_id, v)
        assert im.format == fmt, f"{v}: {im.format}, not {fmt}"
        want = expected_size(shown, box, fit)
        assert im.size == want, f"{v}: {im.size}, expected {want} for {shown} in {box} by {fit}"
        left = no_metadata(im, data)
        assert not left, f"{v}: metadata left: {left}"
        if fit == "contain":
            # The image centred on the canvas: its own box inside the padding.
            s = min(box[0] / shown[0], box[1] / shown[1], 1)
            iw, ih = round(shown[0] * s), round(shown[1] * s)
            x0, y0 = (im.size[0] - iw) // 2, (im.size[1] - ih) // 2
            area = (x0, y0, x0 + iw, y0 + ih)
            pad = im.convert("RGB").getpixel((im.size[0] // 2, 1)) if y0 > 2 else None
            assert pad is None or near(pad, (255, 255, 255), 12), f"{v}: padding {pad}"
        else:
            area = (0, 0) + im.size
        got = quadrants_at(im, area)
        for q, colour in QUADS.items():
            assert near(got[q], colour, 40), f"{v}: quadrant {q} is {got[q]}, expected {colour} (all: {got})"
        notes.append(f"{v} {im.format} {im.size[0]}x{im.size[1]}")
    return ", ".join(notes)


def exif_with_gps(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010E] = "judge-secret description"
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)})
    return exif


XMP = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/" dc:creator="judge-secret"/></rdf:RDF></x:xmpmeta>'
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def jpeg_orientation(o):
    def run():
        shown = displayed()
        stored = shown.transpose(STORED[o]) if o in STORED else shown.copy()
        buf = io.BytesIO()
        stored.save(buf, "JPEG", quality=95, exif=exif_with_gps(o), icc_profile=SRGB, xmp=XMP, comment=b"judge-secret")
        data = buf.getvalue()
        # The judge checks its own fixture first: Pillow shows it as `shown`.
        check = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
        assert check.size == shown.size and near(quadrants_at(check, (0, 0) + check.size)["tl"], RED, 40)
        fid = committed("image", "image/jpeg", data, f"o{o}.jpg", shown.size)
        return judge_upright(fid, shown.size)
    return run


def simple(content_type, fmt, make, filename, **save):
    def run():
        shown = displayed()
        im = make(shown)
        buf = io.BytesIO()
        im.save(buf, fmt, **save)
        fid = committed("image", content_type, buf.getvalue(), filename, shown.size)
        return judge_upright(fid, shown.size)
    return run


def cmyk_jpeg():
    # Patches of ink (C, M, Y, K): none, cyan, magenta + yellow, black; Pillow writes Adobe CMYK.
    patches = [(0, 0, 0, 0), (255, 0, 0, 0), (0, 255, 255, 0), (0, 0, 0, 255)]
    im = Image.new("CMYK", (160, 40))
    for i, p in enumerate(patches):
        im.paste(p, (i * 40, 0, (i + 1) * 40, 40))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95)
    data = buf.getvalue()
    # Pillow's own reading of the file is the reference (it converts CMYK to RGB naively too).
    reference = Image.open(io.BytesIO(data)).convert("RGB")
    fid = committed("image", "image/jpeg", data, "cmyk.jpg", (160, 40))
    notes = []
    for v in ("inside", "card"):
        out, raw, _ = rendition(fid, v)
        assert out.size == (60, 15), f"{v}: {out.size}"
        assert not no_metadata(out, raw), f"{v}: metadata left"
        rgb = out.convert("RGB")
        for i in range(4):
            want = reference.getpixel((i * 40 + 20, 20))
            got = rgb.getpixel((i * 15 + 7, 7))
            # 24: JPEG (or WebP) at quality 80 of a 4x downscale of flat patches, and two naive
            # CMYK conversions that may round differently.
            assert near(got, want, 24), f"{v}: patch {i} is {got}, Pillow reads the source as {want}"
        notes.append(f"{v} {out.format}")
    return "colours as Pillow converts the source: " + ", ".join(notes)


def png16():
    im = Image.new("I;16", (200, 100))
    im.putdata([(x * 65535 // 199) for y in range(100) for x in range(200)])
    buf = io.BytesIO()
    im.save(buf, "PNG")
    fid = committed("image", "image/png", buf.getvalue(), "deep.png", (200, 100))
    out, raw, _ = rendition(fid, "inside")
    assert out.size == (60, 30), out.size
    g = out.convert("L")
    for x in (5, 30, 55):
        want = round(x / 59 * 255)
        assert abs(g.getpixel((x, 15)) - want) <= 12, f"x={x}: {g.getpixel((x, 15))} vs {want}"
    return "a 16-bit gray ramp comes out the same ramp in 8 bits"


def palette_alpha():
    im = Image.new("P", (120, 80))
    im.putpalette([0, 255, 0, 220, 30, 30] + [0] * 762)
    im.paste(1, (60, 0, 120, 80))  # right half red (index 1); left index 0, transparent green
    buf = io.BytesIO()
    im.save(buf, "PNG", transparency=0)
    fid = committed("image", "image/png", buf.getvalue(), "palette.png", (120, 80))
    jpg, _, _ = rendition(fid, "inside")
    rgb = jpg.convert("RGB")
    assert near(rgb.getpixel((10, 20)), (255, 255, 255), 12), f"JPEG: transparent is {rgb.getpixel((10, 20))}, not white"
    assert near(rgb.getpixel((50, 20)), RED, 40), f"JPEG: {rgb.getpixel((50, 20))}"
    webp, _, _ = rendition(fid, "card")
    rgba = webp.convert("RGBA")
    assert rgba.getpixel((10, 20))[3] == 0, f"WebP: transparent is {rgba.getpixel((10, 20))}"
    assert rgba.getpixel((50, 20))[3] == 255 and near(rgba.getpixel((50, 20))[:3], RED, 40), rgba.getpixel((50, 20))
    return "JPEG flattens onto white, WebP keeps alpha 0 / 255"


def la_png():
    im = Image.new("LA", (120, 80), (40, 255))
    im.paste((200, 0), (0, 0, 60, 80))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    fid = committed("image", "image/png", buf.getvalue(), "la.png", (120, 80))
    webp, _, _ = rendition(fid, "card")
    px = webp.convert("RGBA")
    assert px.getpixel((10, 20))[3] == 0 and px.getpixel((50, 20))[3] == 255, (px.getpixel((10, 20)), px.getpixel((50, 20)))
    assert abs(px.getpixel((50, 20))[0] - 40) <= 12, px.getpixel((50, 20))
    return "gray with alpha keeps its alpha in a WebP"


def animated_gif():
    frames = [Image.new("RGB", (120, 80), c) for c in (RED, BLUE, GREEN)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    fid = committed("image", "image/gif", buf.getvalue(), "anim.gif", (120, 80))
    out, _, _ = rendition(fid, "inside")
    got = out.convert("RGB").getpixel((30, 20))
    assert near(got, RED, 40), f"{got}: not the first frame"
    return "the first frame (red), not the later blue and green"


def animated_webp():
    frames = [Image.new("RGB", (120, 80), c) for c in (RED, BLUE)]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=100)
    status, h, _ = commit(upload("image", "image/webp", buf.getvalue(), "anim.webp"))
    assert status == 201, f"commit {status} {h}"
    status, body, _ = call("GET", f"/v1/files/{h['id']}/variants/inside")
    assert (status, body["error"]["code"]) == (422, "image_format_not_rendered"), f"{status} {body}"
    return "422 image_format_not_rendered"


def heif(fmt, content_type, filename):
    def run():
        shown = displayed()
        buf = io.BytesIO()
        shown.save(buf, fmt, quality=90)
        fid = committed("image", content_type, buf.getvalue(), filename, shown.size)
        return judge_upright(fid, shown.size, ("cover", "inside", "card", "small"))
    return run


def bound(profile, size, code):
    def run():
        buf = io.BytesIO()
        Image.new("RGB", size, RED).save(buf, "PNG")
        key = upload(profile, "image/png", buf.getvalue(), "bounded.png")
        first = commit(key)
        again = commit(key)
        for status, body, _ in (first, again):
            assert (status, body["error"]["code"]) == (422, code), f"{status} {body}"
        return f"422 {code}, and again on a retry"
    return run


for o in range(1, 9):
    case(f"jpeg_exif_orientation_{o}_with_gps_xmp_icc", jpeg_orientation(o))
case("progressive_jpeg", simple("image/jpeg", "JPEG", lambda im: im, "p.jpg", quality=90, progressive=True))
case("png_rgba", simple("image/png", "PNG", lambda im: im.convert("RGBA"), "a.png"))
TEXT = PngInfo()
TEXT.add_text("Comment", "judge-secret in a tEXt chunk")
TEXT.add_itxt("Description", "judge-secret in an iTXt chunk")
case("png_with_text_and_exif", simple("image/png", "PNG", lambda im: im, "t.png", exif=exif_with_gps(1), pnginfo=TEXT, icc_profile=SRGB))
case("webp_still", simple("image/webp", "WEBP", lambda im: im.convert("RGBA"), "s.webp", quality=95, exif=exif_with_gps(1)))
case("cmyk_jpeg", cmyk_jpeg)
case("png_16bit_gray", png16)
case("png_palette_with_alpha", palette_alpha)
case("png_gray_alpha", la_png)
case("gif_animated_first_frame", animated_gif)
case("webp_animated_refused", animated_webp)
if HEIF:
    case("heic", heif("HEIF", "image/heic", "i.heic"))
    case("avif", heif("AVIF", "image/avif", "i.avif"))
else:
    print("SKIP heic, avif: pillow-heif is not installed")
case("bound_max_pixels", bound("tiny", (100, 100), "image_too_many_pixels"))
case("bound_min_width", bound("sized", (100, 100), "image_dimensions_out_of_range"))

print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else 'all cases passed'}")
sys.exit(1 if FAILED else 0)

// Drives Debian's chromium (headless, off the network) through upcommit's demo page:
//   node demo.mjs BASE_URL SCREENSHOT_DIR
// Cases: a PNG by presigned PUT (mint a dev token, progress, commit, image displayed), a PNG by
// POST form, a file too large, a file of the wrong type, a network drop during the upload to
// S3, the daily quota, and (as another user) a PNG in two parts. Each committed upload carries
// the checksum the page computed, compared here with one computed by Node (SHA-256 from
// node:crypto, CRC64NVME by a BigInt reference below). Prints {"uploads": [{file_id, user,
// checksum}]} on stdout for the Rust side to check in the catalog and S3; exits 1 with the
// reason on the first failed expectation.
import { chromium } from "playwright-core";
import { createHash } from "node:crypto";
import { deflateSync } from "node:zlib";
import { mkdirSync } from "node:fs";
import path from "node:path";

const [base, shots] = process.argv.slice(2);
if (!base || !shots) {
  console.error("usage: node demo.mjs BASE_URL SCREENSHOT_DIR");
  process.exit(2);
}

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

// Reference CRC-64/NVME: reflected, polynomial 0x9A6C9329AC4BC9B5, init and xorout all ones,
// one BigInt table lookup per byte (slow and plain, unlike the page's sliced 32-bit halves).
const CRC64_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = BigInt(n);
  for (let k = 0; k < 8; k += 1) c = c & 1n ? (c >> 1n) ^ 0x9a6c9329ac4bc9b5n : c >> 1n;
  return c;
});
function crc64nvme(buf) {
  const ones = (1n << 64n) - 1n;
  let c = ones;
  for (const b of buf) c = CRC64_TABLE[Number((c ^ BigInt(b)) & 0xffn)] ^ (c >> 8n);
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(c ^ ones);
  return out.toString("base64");
}
expect(Buffer.from(crc64nvme(Buffer.from("123456789")), "base64").toString("hex") === "ae8b14860a799888",
  "the reference CRC-64/NVME has the catalogue's check value");

const sha256 = (buf) => createHash("sha256").update(buf).digest("base64");

// A real, decodable RGB PNG of w×h with a colour gradient.
function png(w, h, seed) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc32 = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y += 1) {
    raw[y * (w * 3 + 1)] = 0; // filter: none
    for (let x = 0; x < w; x += 1) {
      const o = y * (w * 3 + 1) + 1 + x * 3;
      raw[o] = (x * 4 + seed) & 0xff;
      raw[o + 1] = (y * 4) & 0xff;
      raw[o + 2] = (seed * 7) & 0xff;
    }
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

async function upload(page, file, method) {
  await page.selectOption("#profile", "image");
  await page.selectOption("#method", method);
  await page.setInputFiles("#file", file);
  await page.evaluate(() => { window.upcommitDemo.progressEvents = 0; });
  await page.click("#upload-button");
  await page.waitForFunction(
    () => ["committed", "error"].includes(document.getElementById("status").dataset.state),
    null,
    { timeout: 30000 },
  );
  return {
    state: await page.getAttribute("#status", "data-state"),
    text: await page.textContent("#status"),
    code: await page.textContent("#error-code"),
    fileId: await page.getAttribute("#status", "data-file-id"),
    progressEvents: await page.evaluate(() => window.upcommitDemo.progressEvents),
    progress: await page.evaluate(() => document.getElementById("progress").value),
  };
}

async function committedImage(page, r, what) {
  expect(r.state === "committed", `${what}: committed, got ${r.state}: ${r.text} ${r.code}`);
  expect(r.progressEvents > 0, `${what}: upload progress events fired`);
  expect(r.progress === 100, `${what}: progress bar full, got ${r.progress}`);
  await page.waitForSelector("#preview[data-loaded=true]", { timeout: 15000 });
  const shown = await page.evaluate(() => {
    const img = document.getElementById("preview");
    return { w: img.naturalWidth, h: img.naturalHeight, visible: img.offsetWidth > 0 };
  });
  expect(shown.w === 96 && shown.h === 64 && shown.visible, `${what}: image displayed (${JSON.stringify(shown)})`);
  const handle = JSON.parse(await page.textContent("#handle"));
  expect(handle.id === r.fileId, `${what}: the handle shown is the committed one`);
  expect(JSON.stringify(handle.image) === JSON.stringify({ width: 96, height: 64 }), `${what}: the server read its size: ${JSON.stringify(handle.image)}`);
  expect((await page.textContent("#dimensions")) === "96 × 64 px", `${what}: the page shows its size`);
  // The profile's first variant (48 × 48, inside), rendered by the service and shown from its
  // URL under the page's CSP.
  await page.waitForSelector("#thumbnail[data-loaded=true]", { timeout: 15000 });
  const thumb = await page.evaluate(() => {
    const img = document.getElementById("thumbnail");
    return { w: img.naturalWidth, h: img.naturalHeight, visible: img.offsetWidth > 0 };
  });
  expect(thumb.w === 48 && thumb.h === 32 && thumb.visible, `${what}: thumbnail displayed (${JSON.stringify(thumb)})`);
  const rendition = await page.textContent("#rendition");
  expect(rendition.startsWith("thumb: 48 × 32 px") && rendition.includes("image/jpeg"), `${what}: the page says what the rendition is: ${rendition}`);
  return handle;
}

// The committed handle carries the checksum the page computed, which is `expected` (computed
// here), and the page shows it.
async function carriesChecksum(page, handle, expected, what) {
  const computed = await page.evaluate(() => window.upcommitDemo.checksum);
  expect(JSON.stringify(computed) === JSON.stringify(expected),
    `${what}: the page computed ${JSON.stringify(computed)}, Node ${JSON.stringify(expected)}`);
  expect(JSON.stringify(handle.checksum) === JSON.stringify(expected),
    `${what}: the handle carries ${JSON.stringify(handle.checksum)}, expected ${JSON.stringify(expected)}`);
  const shown = await page.textContent("#checksum");
  expect(shown.includes(`${expected.algorithm} ${expected.value}`), `${what}: the page shows the checksum: ${shown}`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
let failed = null;
const uploads = [];
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  await page.goto(`${base}/demo`);
  await page.waitForSelector("body[data-ready=true]");
  expect(await page.isVisible("#mint-button"), "dev mode shows the mint button");
  await page.fill("#sub", "browser-user");
  await page.click("#mint-button");
  await page.waitForFunction(() => document.getElementById("token").value.split(".").length === 3);

  // The page's CRC-64/NVME has the catalogue's check value.
  const check = await page.evaluate(() =>
    window.upcommitDemo.crc64nvme().update(new TextEncoder().encode("123456789")).base64());
  expect(Buffer.from(check, "base64").toString("hex") === "ae8b14860a799888", `the page's CRC-64/NVME check value: ${check}`);

  // 1. Presigned PUT, through CORS (the PUT's headers, checksum included, need a preflight).
  const sunset = png(96, 64, 1);
  let r = await upload(page, { name: "sunset.png", mimeType: "image/png", buffer: sunset }, "PUT");
  let handle = await committedImage(page, r, "PUT");
  let expected = { algorithm: "SHA256", value: sha256(sunset) };
  await carriesChecksum(page, handle, expected, "PUT");
  uploads.push({ file_id: handle.id, user: "browser-user", checksum: expected });
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: path.join(shots, "demo-committed.png"), fullPage: true });

  // 2. POST form.
  const forest = png(96, 64, 2);
  r = await upload(page, { name: "forest.png", mimeType: "image/png", buffer: forest }, "POST");
  handle = await committedImage(page, r, "POST");
  expected = { algorithm: "SHA256", value: sha256(forest) };
  await carriesChecksum(page, handle, expected, "POST");
  uploads.push({ file_id: handle.id, user: "browser-user", checksum: expected });

  // 3. Too large for the image profile (20 MiB).
  const big = Buffer.concat([png(96, 64, 3), Buffer.alloc(21 * 1024 * 1024)]);
  r = await upload(page, { name: "huge.png", mimeType: "image/png", buffer: big }, "PUT");
  expect(r.state === "error" && r.code === "code: size_too_large", `too large: ${r.state} ${r.code}`);
  expect(/too large/.test(r.text) && /limit is 20\.0 MB/.test(r.text), `too large message: ${r.text}`);
  await page.screenshot({ path: path.join(shots, "demo-too-large.png"), fullPage: true });

  // 4. Wrong type.
  r = await upload(page, { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello") }, "PUT");
  expect(r.state === "error" && r.code === "code: content_type_not_allowed", `wrong type: ${r.state} ${r.code}`);
  expect(/can't be uploaded/.test(r.text), `wrong type message: ${r.text}`);

  // 5. The network drops during the upload to storage.
  const storage = new URL(await page.evaluate(async () => {
    const t = document.getElementById("token").value;
    const resp = await fetch("/v1/files/" + document.getElementById("status").dataset.fileId + "/download-url",
      { headers: { Authorization: `Bearer ${t}` } });
    return (await resp.json()).url;
  })).origin;
  await page.route(`${storage}/**`, (route) => route.abort("connectionreset"));
  r = await upload(page, { name: "dropped.png", mimeType: "image/png", buffer: png(96, 64, 5) }, "PUT");
  expect(r.state === "error" && r.code === "code: network", `network drop: ${r.state} ${r.code}`);
  expect(/connection dropped/.test(r.text), `network drop message: ${r.text}`);
  await page.unroute(`${storage}/**`);

  // 6. The daily quota (3 uploads: PUT, POST and the dropped one were charged).
  r = await upload(page, { name: "one-more.png", mimeType: "image/png", buffer: png(96, 64, 6) }, "PUT");
  expect(r.state === "error" && r.code === "code: quota_exceeded", `quota: ${r.state} ${r.code}`);
  expect(/today's upload limit/.test(r.text), `quota message: ${r.text}`);

  // 7. Another user, a multipart upload in two parts (the server's part size is 5 MiB): the
  // page sends the whole file's CRC64NVME at presign and each part's with its part URL.
  await page.fill("#sub", "browser-user-2");
  await page.click("#mint-button");
  await page.waitForFunction(() => /browser-user-2/.test(document.getElementById("status").textContent));
  const tail = Buffer.alloc(5 * 1024 * 1024 + 1000);
  for (let i = 0; i < tail.length; i += 1) tail[i] = (i * 31 + (i >> 20)) & 0xff;
  const parted = Buffer.concat([png(96, 64, 7), tail]);
  r = await upload(page, { name: "parted.png", mimeType: "image/png", buffer: parted }, "MULTIPART");
  handle = await committedImage(page, r, "multipart");
  expected = { algorithm: "CRC64NVME", value: crc64nvme(parted) };
  await carriesChecksum(page, handle, expected, "multipart");
  const partSize = 5 * 1024 * 1024;
  const parts = await page.evaluate(() => window.upcommitDemo.partChecksums);
  const want = [crc64nvme(parted.subarray(0, partSize)), crc64nvme(parted.subarray(partSize))];
  expect(JSON.stringify(parts) === JSON.stringify(want), `multipart: part checksums ${JSON.stringify(parts)}, Node ${JSON.stringify(want)}`);
  uploads.push({ file_id: handle.id, user: "browser-user-2", checksum: expected });

  const unexpected = consoleErrors.filter((e) => !/Failed to load resource|net::ERR_CONNECTION_RESET/.test(e));
  expect(unexpected.length === 0, `no script errors: ${unexpected.join(" | ")}`);
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.error(failed.stack || String(failed));
  process.exit(1);
}
console.log(JSON.stringify({ uploads }));

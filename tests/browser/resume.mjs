// The browser client (clients/js/upcommit.js, through the demo page) against the network's
// faults, in Debian's chromium:
//   node resume.mjs BASE_URL WORK_DIR
// 1. reload: a multipart upload of 4 parts; parts 1 and 2 reach S3, parts 3 and 4 are held by
//    Playwright; the page is reloaded, the same file (same path, so same name, size and
//    lastModified) picked again → the client finds the upload in localStorage, lists its parts
//    from the server, sends only parts 3 and 4 and commits (counted on the part PUTs).
// 2. drop: a multipart upload of 3 parts whose part 2's first PUT is cut (connection reset) →
//    part 2 alone is sent again; the upload commits.
// 3. abort: Cancel while a part is held → the client aborts the multipart upload on the server
//    (DELETE /v1/uploads/{id}) and drops its resume record.
// 4. swap: a stored PUT whose commit was cut, then another file with the same name, size and
//    lastModified → its own bytes are uploaded and committed, never the earlier upload's.
// The bytes of each committed file are downloaded (GET /v1/files/{id}/content) and compared
// with the file. Prints {"reload": {...}, "drop": {...}, "abort": {...}} (upload ids, file ids,
// file paths) for the Rust side; exits 1 with the reason on the first failed expectation.
import { chromium } from "playwright-core";
import { mkdirSync, writeFileSync, utimesSync } from "node:fs";
import path from "node:path";

const [base, work] = process.argv.slice(2);
if (!base || !work) {
  console.error("usage: node resume.mjs BASE_URL WORK_DIR");
  process.exit(2);
}
mkdirSync(work, { recursive: true });
const PART = 5 * 1024 * 1024; // the server's part size in this test

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

// A file that starts as a 1 × 1 PNG's header (the image profile sniffs the magic bytes and the
// commit reads the size from the header chunk), then a pattern that differs in every part, in
// `size` bytes, written to disk so the file input gives it a real name, size and lastModified
// (the resume record's key).
function pngFile(name, size, seed) {
  const buf = Buffer.alloc(size);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x49, 0x44, 0x41, 0x54]).copy(buf);
  for (let i = 41; i < size; i += 1) buf[i] = (i * 31 + seed + (i >> 20) * 7) & 0xff;
  const file = path.join(work, name);
  writeFileSync(file, buf);
  const t = new Date("2026-01-02T03:04:05Z");
  utimesSync(file, t, t);
  return { file, buf };
}

const partNumber = (url) => Number(new URL(url).searchParams.get("partNumber") || 0);
const isPart = (url) => url.searchParams.has("partNumber") && url.searchParams.has("uploadId");

async function mint(page, sub) {
  await page.fill("#sub", sub);
  await page.click("#mint-button");
  await page.waitForFunction((s) => document.getElementById("status").textContent.includes(s), sub);
}

async function openDemo(page) {
  await page.waitForSelector("body[data-ready=true]");
  await page.selectOption("#profile", "image");
  await page.selectOption("#method", "MULTIPART");
}

async function waitDone(page, timeout = 60000) {
  await page.waitForFunction(
    () => ["committed", "error"].includes(document.getElementById("status").dataset.state),
    null,
    { timeout },
  );
  return {
    state: await page.getAttribute("#status", "data-state"),
    text: await page.textContent("#status"),
    code: await page.textContent("#error-code"),
    fileId: await page.getAttribute("#status", "data-file-id"),
    progress: await page.evaluate(() => document.getElementById("progress").value),
    handle: await page.evaluate(() => {
      const h = document.getElementById("handle");
      return h.hidden ? null : JSON.parse(h.textContent);
    }),
  };
}

const records = (page) => page.evaluate(() =>
  Object.keys(localStorage).filter((k) => k.startsWith("upcommit:")).map((k) => JSON.parse(localStorage.getItem(k))));

// The committed file's bytes, downloaded as any client would (302 to S3).
async function download(page, fileId) {
  const token = await page.inputValue("#token");
  const resp = await fetch(`${base}/v1/files/${fileId}/content`, { headers: { Authorization: `Bearer ${token}` } });
  expect(resp.ok, `download ${fileId}: ${resp.status}`);
  return Buffer.from(await resp.arrayBuffer());
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
let failed = null;
const result = {};
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  const apiCalls = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.origin === new URL(base).origin && u.pathname.startsWith("/v1/")) apiCalls.push(`${r.method()} ${u.pathname}`);
  });
  await page.goto(`${base}/demo`);
  await openDemo(page);

  // --- 1. reload -------------------------------------------------------------------------
  await mint(page, "resume-user");
  const one = pngFile("resumed.png", 3 * PART + 1000, 1);
  const held = [];
  const before = new Map();
  const finished = new Set();
  page.on("requestfinished", async (r) => {
    if (r.method() === "PUT" && isPart(new URL(r.url()))) {
      const resp = await r.response();
      if (resp && resp.status() === 200) finished.add(partNumber(r.url()));
    }
  });
  const after = new Map();
  let reloaded = false;
  // One handler for both halves: unrouting would release the held requests to S3.
  await page.route(isPart, (route) => {
    const n = partNumber(route.request().url());
    if (reloaded) {
      after.set(n, (after.get(n) || 0) + 1);
      return route.continue();
    }
    before.set(n, (before.get(n) || 0) + 1);
    if (n <= 2) return route.continue();
    held.push(route); // parts 3 and 4 never reach S3: the reload cuts them
    return undefined;
  });
  await page.setInputFiles("#file", one.file);
  await page.click("#upload-button");
  const t0 = Date.now();
  // Both held parts must have reached the route before the reload: the client sends up to
  // four parts at once, and a part 4 routed after `reloaded` is set would be the old page's
  // request, counted (and let through) as the new page's.
  const heldNumbers = () => held.map((h) => partNumber(h.request().url())).sort();
  while (!(finished.has(1) && finished.has(2) && JSON.stringify(heldNumbers()) === "[3,4]")) {
    expect(Date.now() - t0 < 60000, `parts 1 and 2 stored and parts 3 and 4 held (finished ${[...finished]}, held ${heldNumbers()})`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const [record] = await records(page);
  expect(record && record.method === "MULTIPART" && record.part_count === 4, `a resume record: ${JSON.stringify(record)}`);
  const callsBeforeReload = apiCalls.length;
  reloaded = true;
  await page.reload();
  await openDemo(page);
  expect((await records(page)).length === 1, "the record survives the reload");
  await mint(page, "resume-user");
  await page.setInputFiles("#file", one.file);
  await page.click("#upload-button");
  let r = await waitDone(page);
  expect(r.state === "committed", `reload: committed, got ${r.state}: ${r.text} ${r.code}`);
  expect(r.progress === 100, `reload: progress 100, got ${r.progress}`);
  const resumedId = await page.evaluate(() => window.upcommitDemo.resumed);
  expect(resumedId === record.upload_id, `reload: resumed ${resumedId}, recorded ${record.upload_id}`);
  const heldParts = await page.evaluate(() => window.upcommitDemo.heldParts);
  expect(JSON.stringify(heldParts) === "[1,2]", `reload: the server listed parts 1 and 2 as held: ${JSON.stringify(heldParts)}`);
  expect(!after.has(1) && !after.has(2), `reload: parts 1 and 2 not sent again: ${JSON.stringify([...after])}`);
  expect(after.get(3) === 1 && after.get(4) === 1, `reload: parts 3 and 4 sent once each: ${JSON.stringify([...after])}`);
  const calls = apiCalls.slice(callsBeforeReload);
  expect(!calls.includes("POST /v1/uploads"), `reload: no new presign: ${calls.join(", ")}`);
  expect(calls.includes(`GET /v1/uploads/${record.upload_id}/parts`), `reload: the parts were listed: ${calls.join(", ")}`);
  expect(r.handle && r.handle.upload_id === record.upload_id && r.handle.checksum.algorithm === "CRC64NVME",
    `reload: the handle: ${JSON.stringify(r.handle)}`);
  expect((await records(page)).length === 0, "reload: the record is dropped after the commit");
  let bytes = await download(page, r.fileId);
  expect(bytes.equals(one.buf), `reload: the downloaded bytes are the file's (${bytes.length} of ${one.buf.length})`);
  result.reload = {
    upload_id: record.upload_id, file_id: r.fileId, path: one.file,
    parts_before: Object.fromEntries(before), parts_after: Object.fromEntries(after),
  };
  await page.unrouteAll({ behavior: "ignoreErrors" });

  // --- 2. a dropped part ------------------------------------------------------------------
  await mint(page, "drop-user");
  const two = pngFile("dropped.png", 2 * PART + 500, 2);
  const sent = new Map();
  let dropped = 0;
  await page.route(isPart, (route) => {
    const n = partNumber(route.request().url());
    sent.set(n, (sent.get(n) || 0) + 1);
    if (n === 2 && dropped === 0) {
      dropped += 1;
      return route.abort("connectionreset");
    }
    return route.continue();
  });
  await page.setInputFiles("#file", two.file);
  await page.click("#upload-button");
  r = await waitDone(page);
  expect(r.state === "committed", `drop: committed, got ${r.state}: ${r.text} ${r.code}`);
  expect(dropped === 1, "drop: part 2 was cut once");
  expect(sent.get(1) === 1 && sent.get(2) === 2 && sent.get(3) === 1,
    `drop: part 2 alone sent again: ${JSON.stringify([...sent])}`);
  bytes = await download(page, r.fileId);
  expect(bytes.equals(two.buf), `drop: the downloaded bytes are the file's (${bytes.length} of ${two.buf.length})`);
  result.drop = { file_id: r.fileId, path: two.file, parts: Object.fromEntries(sent) };
  await page.unrouteAll({ behavior: "ignoreErrors" });

  // --- 3. abort ---------------------------------------------------------------------------
  await mint(page, "abort-user");
  const three = pngFile("cancelled.png", 2 * PART + 10, 3);
  const stalled = [];
  await page.route(isPart, (route) => {
    if (partNumber(route.request().url()) === 2) {
      stalled.push(route);
      return undefined;
    }
    return route.continue();
  });
  await page.setInputFiles("#file", three.file);
  await page.click("#upload-button");
  const t1 = Date.now();
  while (stalled.length === 0) {
    expect(Date.now() - t1 < 60000, "abort: part 2 started");
    await new Promise((res) => setTimeout(res, 50));
  }
  const [pending] = await records(page);
  expect(pending && pending.method === "MULTIPART", `abort: a resume record while uploading: ${JSON.stringify(pending)}`);
  const deleted = page.waitForResponse((resp) =>
    resp.request().method() === "DELETE" && resp.url().endsWith(`/v1/uploads/${pending.upload_id}`));
  await page.click("#cancel-button");
  const del = await deleted;
  expect(del.status() === 204, `abort: DELETE answered ${del.status()}`);
  r = await waitDone(page);
  expect(r.state === "error" && r.code === "code: aborted", `abort: ${r.state} ${r.code}`);
  expect((await records(page)).length === 0, "abort: the record is dropped");
  result.abort = { upload_id: pending.upload_id };
  await page.unrouteAll({ behavior: "ignoreErrors" });

  // --- 4. another file under the same name, size and date -----------------------------------
  // A single PUT stored, its commit cut, the page reloaded; then a file with the same name,
  // size and lastModified but other bytes is picked → the client must upload those bytes, not
  // commit the earlier upload's (its record names the same file as far as the key can tell).
  await mint(page, "swap-user");
  await page.selectOption("#method", "PUT");
  const first = pngFile("swap.png", 4096, 4);
  await page.route((u) => u.pathname === "/v1/files", (route) =>
    route.request().method() === "POST" ? route.abort("connectionreset") : route.continue());
  await page.setInputFiles("#file", first.file);
  await page.click("#upload-button");
  const t2 = Date.now();
  while (!(await records(page)).some((rec) => rec.stored)) {
    expect(Date.now() - t2 < 60000, "swap: the first file stored, its commit cut");
    await new Promise((res) => setTimeout(res, 50));
  }
  await page.unrouteAll({ behavior: "ignoreErrors" });
  await page.reload();
  await openDemo(page);
  await page.selectOption("#method", "PUT");
  await mint(page, "swap-user");
  const second = pngFile("swap.png", 4096, 5);
  expect(!second.buf.equals(first.buf), "swap: other bytes");
  await page.setInputFiles("#file", second.file);
  await page.click("#upload-button");
  r = await waitDone(page);
  expect(r.state === "committed", `swap: committed, got ${r.state}: ${r.text} ${r.code}`);
  bytes = await download(page, r.fileId);
  expect(bytes.equals(second.buf), "swap: the committed bytes are the file picked, not the earlier upload's");
  result.swap = { file_id: r.fileId };

  const unexpected = consoleErrors.filter((e) => !/Failed to load resource|net::ERR_CONNECTION_RESET|net::ERR_FAILED/.test(e));
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
console.log(JSON.stringify(result));

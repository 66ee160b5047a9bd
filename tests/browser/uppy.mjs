// Runs the Uppy 6 example (clients/js/examples/uppy.html + uppy.js) in Debian's chromium:
//   node uppy.mjs API_BASE PAGE_ORIGIN TOKEN BUNDLE_PATH
// The example's uppy.js is bundled here with esbuild (Uppy's packages from this folder's
// node_modules, pinned in package.json) into BUNDLE_PATH, which the test's server on
// PAGE_ORIGIN serves beside uppy.html (no CDN). Two PNGs go up by presigned PUT in one Uppy batch, one by POST form; each
// is presigned with its SHA-256 by upcommit (`signRequest`), sent by Uppy's S3 plugin and
// committed on `upload-success`. Prints {"files": [{file_id, key, sha256, method}]}; exits 1
// with the reason on the first failed expectation.
import { chromium } from "playwright-core";
import { build } from "esbuild";
import { createHash } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [api, origin, token, bundlePath] = process.argv.slice(2);
if (!api || !origin || !token || !bundlePath) {
  console.error("usage: node uppy.mjs API_BASE PAGE_ORIGIN TOKEN BUNDLE_PATH");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const examples = path.join(here, "../../clients/js/examples");

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

await build({
  entryPoints: [path.join(examples, "uppy.js")],
  bundle: true,
  format: "esm",
  outfile: bundlePath,
  nodePaths: [path.join(here, "node_modules")],
  logLevel: "warning",
});

const png = (seed, size) => {
  const buf = Buffer.alloc(size);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x49, 0x44, 0x41, 0x54]).copy(buf);
  for (let i = 41; i < size; i += 1) buf[i] = (i * 13 + seed) & 0xff;
  return buf;
};
const sha256 = (buf) => createHash("sha256").update(buf).digest("base64");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
let failed = null;
const files = [];
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  const storage = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.origin !== new URL(api).origin && u.origin !== origin && r.method() !== "OPTIONS") storage.push(`${r.method()} ${u.pathname}`);
  });

  for (const [method, batch] of [
    ["PUT", [{ name: "uppy-one.png", seed: 1, size: 70000 }, { name: "uppy-two.png", seed: 2, size: 1234 }]],
    ["POST", [{ name: "uppy-form.png", seed: 3, size: 5000 }]],
  ]) {
    await page.goto(`${origin}/uppy.html`);
    expect(await page.evaluate(() => window.isSecureContext), "the example page is a secure context (crypto.subtle)");
    await page.fill("#api", api);
    await page.fill("#token", token);
    await page.selectOption("#method", method);
    const bufs = batch.map((f) => png(f.seed, f.size));
    await page.setInputFiles("#file", batch.map((f, i) => ({ name: f.name, mimeType: "image/png", buffer: bufs[i] })));
    storage.length = 0;
    await page.click("#upload");
    await page.waitForSelector("body[data-done=true]", { timeout: 30000 });
    const result = JSON.parse(await page.textContent("#result"));
    expect(result.length === batch.length, `${method}: ${batch.length} files, got ${JSON.stringify(result)}`);
    for (const [i, f] of batch.entries()) {
      const r = result.find((x) => x.name === f.name);
      expect(r && r.handle, `${method} ${f.name}: committed, got ${JSON.stringify(r)} (console: ${consoleErrors.join(" | ")})`);
      expect(r.handle.key !== r.key && r.key.startsWith("tmp/") && r.handle.upload_id === r.upload_id,
        `${method} ${f.name}: the tmp key presigned by upcommit was committed: ${JSON.stringify(r)}`);
      expect(r.handle.size === f.size && r.handle.original_filename === f.name, `${method} ${f.name}: ${JSON.stringify(r.handle)}`);
      const want = { algorithm: "SHA256", value: sha256(bufs[i]) };
      expect(JSON.stringify(r.handle.checksum) === JSON.stringify(want),
        `${method} ${f.name}: checksum ${JSON.stringify(r.handle.checksum)}, Node ${JSON.stringify(want)}`);
      files.push({ file_id: r.handle.id, key: r.handle.key, sha256: want.value, method });
    }
    // Uppy sent the bytes straight to S3, one request per file, by the method upcommit chose.
    expect(storage.length === batch.length && storage.every((s) => s.startsWith(`${method} `)),
      `${method}: storage requests ${JSON.stringify(storage)}`);
  }
  // (The browser's own favicon request answers 404 from the test's server.)
  const unexpected = consoleErrors.filter((e) => !/Failed to load resource: the server responded with a status of 404/.test(e));
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
console.log(JSON.stringify({ files }));

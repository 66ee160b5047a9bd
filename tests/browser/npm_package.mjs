// The browser client as an app gets it: `npm pack` in clients/js, the tarball installed into a
// throwaway app, bundled with esbuild, and an upload through it in Debian's chromium.
//   node npm_package.mjs API_BASE PAGE_ORIGIN TOKEN WORK_DIR
// In WORK_DIR (outside the repository, so nothing resolves from its node_modules): pack/ gets
// the tarball (its `prepack` generates upcommit.d.ts from the JSDoc); app/ is the app: a
// package.json, `npm install --offline pack/upcommit-client-X.Y.Z.tgz` (no dependencies, so no
// registry), the files of npm_app/, then
// - tsc (tests/browser's, by path) type-checks typed.ts against the installed .d.ts and refuses
//   mistyped.ts with exactly its two errors;
// - esbuild (tests/browser's binary, by path) bundles app.js, whose `import … from
//   "upcommit-client"` resolves through the package's `exports`, into app/app.bundle.js;
// - Playwright opens index.html on PAGE_ORIGIN (the test serves app/), picks a PNG and uploads:
//   presign → PUT to S3 → commit, through the bundled client.
// Prints {"tarball", "installed_version", "file", "file_id", "handle", …} on stdout; exits 1
// with the reason on the first failed expectation.
import { chromium } from "playwright-core";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [api, origin, token, work] = process.argv.slice(2);
if (!api || !origin || !token || !work) {
  console.error("usage: node npm_package.mjs API_BASE PAGE_ORIGIN TOKEN WORK_DIR");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const clientDir = path.join(here, "../../clients/js");
const bin = (name) => path.join(here, "node_modules/.bin", name);

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

/** Runs a command; its stdout, or a thrown error with its output. */
function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

const result = {};

// 1. The tarball, as `npm pack` makes it (prepack: `tsc` writes upcommit.d.ts).
const packDir = path.join(work, "pack");
fs.mkdirSync(packDir, { recursive: true });
const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", packDir, "--loglevel=error"], clientDir));
result.tarball = { filename: packed.filename, files: packed.files.map((f) => f.path).sort(), size: packed.size };
const tarball = path.join(packDir, packed.filename);
expect(fs.existsSync(tarball), `the tarball ${tarball} exists`);

// 2. A throwaway app installs it, offline: it has no dependencies to fetch.
const app = path.join(work, "app");
fs.mkdirSync(app, { recursive: true });
fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "throwaway-app", private: true, type: "module" }));
run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], app);
const installed = path.join(app, "node_modules/upcommit-client");
expect(!fs.lstatSync(installed).isSymbolicLink(), "the package is installed (unpacked), not linked to clients/js");
const manifest = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8"));
result.installed_version = manifest.version;
// TypeScript falls back from a missing `types` target to the .d.ts beside `default`'s module,
// so a wrong `types` path would pass the type-check below: each target is looked for here.
for (const [condition, target] of Object.entries(manifest.exports["."])) {
  expect(fs.existsSync(path.join(installed, target)), `exports["."].${condition} (${target}) is in the package`);
}
for (const f of ["index.html", "app.js", "typed.ts", "mistyped.ts"]) {
  fs.copyFileSync(path.join(here, "npm_app", f), path.join(app, f));
}

// 3. The types an app's TypeScript sees: the installed .d.ts, with no `any` outside comments.
const dts = fs.readFileSync(path.join(installed, "upcommit.d.ts"), "utf8");
const code = dts.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
expect(!/\bany\b/.test(code), `upcommit.d.ts has no \`any\`: ${code.split("\n").filter((l) => /\bany\b/.test(l)).join(" | ")}`);
const tscFlags = ["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022,dom", "--module", "esnext", "--moduleResolution", "bundler"];
const listed = run(bin("tsc"), [...tscFlags, "--listFiles", "typed.ts"], app);
expect(listed.split("\n").some((l) => l.trim() === path.join(installed, "upcommit.d.ts")),
  `typed.ts type-checks against the installed node_modules/upcommit-client/upcommit.d.ts:\n${listed}`);
const wrong = spawnSync(bin("tsc"), [...tscFlags, "mistyped.ts"], { cwd: app, encoding: "utf8" });
const errors = wrong.stdout.split("\n").filter((l) => l.includes("error TS"));
expect(wrong.status !== 0 && errors.length === 2
  && errors.some((e) => e.includes(`TS2322: Type '"PATCH"' is not assignable`))
  && errors.some((e) => e.includes("TS2322: Type 'string' is not assignable to type 'number'")),
  `mistyped.ts is refused for its two mistakes only:\n${wrong.stdout}${wrong.stderr}`);
result.mistyped = errors;

// 4. The app's bundle, by esbuild; the package's module in it is the installed one.
run(bin("esbuild"), ["app.js", "--bundle", "--format=esm", "--outfile=app.bundle.js", "--metafile=meta.json", "--log-level=warning"], app);
const inputs = Object.keys(JSON.parse(fs.readFileSync(path.join(app, "meta.json"), "utf8")).inputs);
expect(inputs.includes("node_modules/upcommit-client/upcommit.js") && inputs.length === 2,
  `the bundle is app.js and the installed package: ${JSON.stringify(inputs)}`);

// 5. An upload through the bundle, in Chromium.
const bytes = Buffer.alloc(300 * 1024);
Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x49, 0x44, 0x41, 0x54]).copy(bytes);
for (let i = 41; i < bytes.length; i += 1) bytes[i] = (i * 31 + (i >> 9)) & 0xff;
const file = path.join(work, "packaged.png");
fs.writeFileSync(file, bytes);
const sha256 = createHash("sha256").update(bytes).digest("base64");
result.file = { path: file, size: bytes.length, sha256 };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
let failed = null;
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  const requests = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (r.method() === "OPTIONS" || u.origin === origin) return;
    requests.push(u.origin === new URL(api).origin ? `api ${r.method()} ${u.pathname}` : `storage ${r.method()}`);
  });

  await page.goto(`${origin}/`);
  await page.fill("#api", api);
  await page.fill("#token", token);
  await page.setInputFiles("#file", { name: "packaged.png", mimeType: "image/png", buffer: bytes });
  await page.click("#upload");
  await page.waitForSelector("body[data-done=true]", { timeout: 30000 });
  const shown = JSON.parse(await page.textContent("#result"));
  expect(shown.handle, `committed, got ${JSON.stringify(shown)} (console: ${consoleErrors.join(" | ")})`);
  const h = shown.handle;
  expect(h.size === bytes.length && h.original_filename === "packaged.png" && h.content_type === "image/png",
    `the handle describes the file: ${JSON.stringify(h)}`);
  expect(JSON.stringify(h.checksum) === JSON.stringify({ algorithm: "SHA256", value: sha256 }),
    `the client declared the file's SHA-256 (Node's ${sha256}), got ${JSON.stringify(h.checksum)}`);
  expect(JSON.stringify(shown.stages) === JSON.stringify(["checksumming", "presigning", "uploading", "committing", "committed"]),
    `stages ${JSON.stringify(shown.stages)}`);
  expect(shown.loaded === bytes.length, `progress reached the file's size, got ${shown.loaded}`);
  expect(JSON.stringify(requests) === JSON.stringify(["api POST /v1/uploads", "storage PUT", "api POST /v1/files"]),
    `presign → PUT → commit, got ${JSON.stringify(requests)}`);
  const unexpected = consoleErrors.filter((e) => !/Failed to load resource: the server responded with a status of 404/.test(e));
  expect(unexpected.length === 0, `no script errors: ${unexpected.join(" | ")}`);
  result.file_id = (await page.textContent("#file-id")).trim();
  result.handle = h;
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

// A page on another origin calls the API with a bearer token, as docs/api.md shows:
//   node cross_origin.mjs API_BASE ALLOWED_PAGE STRANGER_PAGE TOKEN
// On ALLOWED_PAGE (listed in UPCOMMIT_CORS_ORIGINS) the page's own script presigns (a CORS
// preflight: Authorization and a JSON body), PUTs the bytes to S3 and commits. On
// STRANGER_PAGE (not listed) the browser must block the presign. Prints
// {"file_id": ..., "stranger": ...} on stdout; exits 1 with the reason on a failed expectation.
import { chromium } from "playwright-core";

const [api, allowed, stranger, token] = process.argv.slice(2);
if (!api || !allowed || !stranger || !token) {
  console.error("usage: node cross_origin.mjs API_BASE ALLOWED_PAGE STRANGER_PAGE TOKEN");
  process.exit(2);
}

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

// Runs in the page: presign, upload to the presigned URL, commit. Returns what happened.
async function uploadFromPage({ api, token }) {
  const bytes = new Uint8Array(2048);
  bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x49, 0x44, 0x41, 0x54]);
  const auth = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
  let presigned;
  try {
    const resp = await fetch(`${api}/v1/uploads`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ profile: "image", content_type: "image/png", size: bytes.length, method: "PUT" }),
    });
    presigned = { status: resp.status, requestId: resp.headers.get("x-request-id"), body: await resp.json() };
  } catch (e) {
    return { blocked: `${e.name}: ${e.message}` };
  }
  if (presigned.status !== 201) return { presigned };
  const put = await fetch(presigned.body.url, {
    method: "PUT",
    headers: Object.fromEntries(
      Object.entries(presigned.body.headers).filter(([k]) => k.toLowerCase() !== "content-length"),
    ),
    body: bytes,
  });
  const commit = await fetch(`${api}/v1/files`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ key: presigned.body.key }),
  });
  return {
    presigned: { status: presigned.status, requestId: presigned.requestId },
    put: put.status,
    commit: { status: commit.status, body: await commit.json() },
  };
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
  const page = await browser.newPage();
  const apiRequests = [];
  page.on("request", (r) => { if (r.url().startsWith(api)) apiRequests.push(`${r.method()} ${new URL(r.url()).pathname}`); });

  await page.goto(allowed);
  expect(new URL(page.url()).origin !== new URL(api).origin, "the page is on another origin than the API");
  const ok = await page.evaluate(uploadFromPage, { api, token });
  expect(!ok.blocked, `allowed origin: not blocked (${ok.blocked})`);
  expect(ok.presigned.status === 201, `allowed origin: presign 201, got ${JSON.stringify(ok.presigned)}`);
  expect(!!ok.presigned.requestId, "allowed origin: the exposed x-request-id is readable");
  expect(ok.put === 200, `allowed origin: PUT to S3 200, got ${ok.put}`);
  expect(ok.commit.status === 201, `allowed origin: commit 201, got ${JSON.stringify(ok.commit)}`);
  result.file_id = ok.commit.body.id;

  await page.goto(stranger);
  const no = await page.evaluate(uploadFromPage, { api, token });
  expect(!!no.blocked, `stranger origin: the browser blocks the presign, got ${JSON.stringify(no)}`);
  result.stranger = no.blocked;
  result.api_requests = apiRequests;
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

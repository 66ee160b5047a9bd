// The admin console's file page shows a rendition (issue 37): sign in, open an image's page,
// press its variant's button; the image loads from its presigned URL under the page's
// Content-Security-Policy (which allows images from the bucket's origin while a profile has
// variants, and nothing else more). Prints {"shown": {...}, "csp_errors": [...]}.
import { chromium } from "playwright-core";

const [base, admin, fileId] = process.argv.slice(2);
if (!base || !admin || !fileId) {
  console.error("usage: node console_rendition.mjs BASE_URL ADMIN_TOKEN FILE_ID");
  process.exit(2);
}
function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  const refused = [];
  page.on("response", (r) => { if (r.status() >= 400 && !r.url().endsWith("/favicon.ico")) refused.push(`${r.status()} ${r.url()}`); });
  await page.goto(`${base}/admin`);
  await page.waitForSelector("body[data-page=sign-in][data-state=ready]");
  await page.fill("#token", admin);
  await page.click("#sign-in-button");
  await page.waitForSelector("body[data-page=overview][data-state=ready]", { timeout: 30000 });
  await page.evaluate((h) => { location.hash = h; }, `#/files/${fileId}`);
  await page.waitForSelector("body[data-page=file][data-state=ready] [data-field=variants] button[data-variant=thumb]", { timeout: 30000 });
  await page.click("button[data-variant=thumb]");
  await page.waitForFunction(() => {
    const img = document.getElementById("rendition-image");
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 30000 });
  const shown = await page.evaluate(() => {
    const img = document.getElementById("rendition-image");
    return { w: img.naturalWidth, h: img.naturalHeight, variant: img.dataset.variant, src: img.src.split("?")[0] };
  });
  // A CSP violation is a console error of its own ("Refused to load the image …").
  const unexpected = errors.filter((e) => !/Failed to load resource/.test(e));
  expect(unexpected.length === 0 && refused.length === 0, `no CSP violation or failed request: ${unexpected.join(" | ")} ${refused.join(" | ")}`);
  console.log(JSON.stringify({ shown, errors }));
} finally {
  await browser.close();
}

// Signs in to upcommit's admin console through an identity provider (tests/browser/
// oidc_provider.py: the authorization code flow with PKCE) in Debian's chromium:
//   node console_sign_in.mjs BASE_URL IDP_URL SCREENSHOT_DIR EXPECT
// EXPECT is "admin" (the provider's token carries the admin claim: the overview shows the
// API's bucket verdict), "user" (it does not: only the refusal shows, nothing is kept),
// "foreign" (the provider's token endpoint is on another origin than its issuer, which the
// page's CSP does not allow: refused before the browser leaves for the provider) or
// "nonascii" (the provider's token is no header value: refused, not kept).
// Both also check: the code and state leave the address bar at once, the token is kept in
// sessionStorage only, and an answer carrying another state is ignored without asking the
// token endpoint. Prints {"requests": [...IdP paths the browser asked...]}; exits 1 with the
// reason on the first failed expectation.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import path from "node:path";

const [base, idp, shots, want] = process.argv.slice(2);
if (!base || !idp || !shots || !["admin", "user", "foreign", "nonascii"].includes(want)) {
  console.error("usage: node console_sign_in.mjs BASE_URL IDP_URL SCREENSHOT_DIR admin|user|foreign|nonascii");
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
let failed = null;
const requests = [];
try {
  mkdirSync(shots, { recursive: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  page.on("request", (r) => {
    if (r.url().startsWith(idp)) requests.push(`${r.method()} ${new URL(r.url()).pathname}`);
  });

  // An answer this tab never asked for: ignored, and the token endpoint is not asked.
  await page.goto(`${base}/admin?code=stolen&state=forged#/files`);
  await page.waitForSelector("body[data-page=sign-in][data-state=refused]");
  const forged = await page.textContent("#sign-in-error");
  expect(/state does not match/.test(forged), `a forged answer is refused: ${forged}`);
  expect(!requests.some((r) => r.endsWith("/token")), `no token asked for a forged answer: ${requests}`);
  expect((await page.evaluate(() => location.search)) === "", "the forged code left the address bar");
  expect((await page.evaluate(() => sessionStorage.length)) === 0, "nothing kept from a forged answer");

  // An error in the address shows only an OAuth error code, never its free text.
  await page.goto(`${base}/admin?error=Paste%20your%20token%20at%20evil.example`);
  await page.waitForSelector("body[data-page=sign-in][data-state=refused]");
  const shown = await page.textContent("#sign-in-error");
  expect(!shown.includes("evil.example") && /did not sign you in/.test(shown), `only a fixed text: ${shown}`);
  await page.goto(`${base}/admin?error=access_denied`);
  await page.waitForSelector("body[data-page=sign-in][data-state=refused]");
  expect((await page.textContent("#sign-in-error")).includes("(access_denied)"), "an OAuth error code is named");

  // The real flow.
  await page.goto(`${base}/admin#/jobs`);
  await page.waitForSelector("body[data-page=sign-in][data-state=ready]");
  expect(await page.isVisible("#provider-button"), "the provider's sign-in is offered");
  expect((await page.textContent("#provider-issuer")) === idp, "it names the provider's issuer");
  await page.screenshot({ path: path.join(shots, `provider-sign-in-${want}.png`), fullPage: true });
  await page.click("#provider-button");
  if (want === "admin") {
    // Back on the page it left (#/jobs), signed in.
    await page.waitForSelector("body[data-page=jobs][data-state=ready]", { timeout: 15000 });
    const stored = await page.evaluate(() => sessionStorage.getItem("upcommit.console.token"));
    expect(typeof stored === "string" && stored.split(".").length === 3, "the provider's token is the session's");
    expect((await page.evaluate(() => localStorage.length)) === 0, "nothing in localStorage");
    // The provider's token opens the admin API itself, as the page uses it; once the bucket
    // has been checked, the overview shows the API's verdict.
    let bucket = null;
    for (let i = 0; i < 120; i += 1) {
      const r = await fetch(`${base}/v1/admin/bucket`, { headers: { Authorization: `Bearer ${stored}` } });
      expect(r.status === 200, `the provider's admin token opens the admin API: ${r.status}`);
      bucket = await r.json();
      if (bucket.report) break;
      await new Promise((done) => setTimeout(done, 250));
    }
    expect(bucket.report, "the bucket has been checked");
    await page.click("[data-nav=overview]");
    await page.waitForSelector("body[data-page=overview][data-state=ready]");
    expect((await page.textContent("[data-field=verdict]")) === bucket.verdict, "the overview shows the API's verdict");
    await page.screenshot({ path: path.join(shots, "provider-signed-in.png"), fullPage: true });
    // An answer arriving in a signed-in tab ends that session first: the sign-in screen never
    // hides a token still kept.
    await page.goto(`${base}/admin?code=late&state=forged#/overview`);
    await page.waitForSelector("body[data-page=sign-in][data-state=refused]");
    expect((await page.evaluate(() => sessionStorage.getItem("upcommit.console.token"))) === null, "the old session ended");
  } else if (want === "foreign") {
    await page.waitForSelector("body[data-page=sign-in][data-state=refused]", { timeout: 15000 });
    const why = await page.textContent("#sign-in-error");
    expect(/not on the issuer's origin/.test(why), `a token endpoint on another origin is refused: ${why}`);
    expect(!requests.includes("GET /authorize"), `the browser never left for the provider: ${requests}`);
  } else if (want === "nonascii") {
    await page.waitForSelector("body[data-page=sign-in][data-state=refused]", { timeout: 15000 });
    const why = await page.textContent("#sign-in-error");
    expect(/not a token a request can carry/.test(why), `a token no header can carry is refused: ${why}`);
    expect((await page.evaluate(() => sessionStorage.getItem("upcommit.console.token"))) === null, "and not kept");
  } else {
    await page.waitForSelector("body[data-page=sign-in][data-state=refused]", { timeout: 15000 });
    const why = await page.textContent("#sign-in-error");
    expect(/admin_required/.test(why), `a provider user without the admin claim is refused: ${why}`);
    expect((await page.evaluate(() => sessionStorage.getItem("upcommit.console.token"))) === null, "the refused token is not kept");
    expect((await page.locator("#view *").count()) === 0, "nothing of the API's shows");
    await page.screenshot({ path: path.join(shots, "provider-refused-user.png"), fullPage: true });
  }
  expect((await page.evaluate(() => location.search)) === "", "the code and state left the address bar");
  const steps = want === "foreign"
    ? ["GET /.well-known/openid-configuration"]
    : ["GET /.well-known/openid-configuration", "GET /authorize", "POST /token"];
  for (const step of steps) {
    expect(requests.includes(step), `the browser asked the provider ${step}: ${requests}`);
  }
  expect(errors.length === 0, `no script errors or CSP violations: ${errors}`);
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.error(String(failed.stack || failed));
  process.exit(1);
}
console.log(JSON.stringify({ requests }));

// A throwaway app's own code (tests/browser/npm_package.mjs copies it into an app that ran
// `npm install upcommit-client-X.Y.Z.tgz`): the bare name resolves through the package's
// `exports`, and esbuild bundles it into app.bundle.js, which index.html loads.
import { UpcommitClient, UpcommitError } from "upcommit-client";

const $ = (id) => /** @type {HTMLInputElement} */ (document.getElementById(id));

$("upload").addEventListener("click", async () => {
  const client = new UpcommitClient({ baseUrl: $("api").value, token: $("token").value });
  const stages = [];
  let loaded = 0;
  let result;
  try {
    const handle = await client.upload(/** @type {FileList} */ ($("file").files)[0], {
      profile: "image",
      onStage: (stage) => stages.push(stage),
      onProgress: (p) => { loaded = p.loaded; },
    });
    $("file-id").textContent = handle.id;
    result = { handle, stages, loaded };
  } catch (e) {
    result = { error: e instanceof UpcommitError ? `${e.code}: ${e.message}` : String(e), stages };
  }
  $("result").textContent = JSON.stringify(result);
  document.body.dataset.done = "true";
});

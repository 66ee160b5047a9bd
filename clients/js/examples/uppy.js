// Uppy 6 (`@uppy/core` + `@uppy/aws-s3`) uploading through upcommit: Uppy's S3 plugin sends the
// bytes, upcommit presigns them (`signRequest`) and commits them (`upload-success`).
//
// Build (Uppy's packages import CommonJS and bare names, so a bundler resolves them; any will
// do — the test uses esbuild):
//   npm install @uppy/core@6 @uppy/aws-s3@6 esbuild
//   npx esbuild clients/js/examples/uppy.js --bundle --format=esm --outfile=uppy.bundle.js
// then open uppy.html beside uppy.bundle.js, on an origin in UPCOMMIT_CORS_ORIGINS and in the
// bucket's CORS rule. See docs/clients.md ("Uppy").
//
// Single uploads only (PUT or POST form): Uppy 6's multipart path presigns raw S3 calls
// (CreateMultipartUpload, UploadPart, CompleteMultipartUpload) that upcommit does not hand out —
// it starts and completes multipart uploads itself. For large files use upcommit.js's own
// `upload()`, which also resumes after a reload.
import Uppy from "@uppy/core";
import AwsS3 from "@uppy/aws-s3";
import { UpcommitClient, sha256Of } from "../upcommit.js";

/**
 * An Uppy instance whose uploads are presigned and committed by upcommit.
 * @param {{baseUrl: string, token: string | (() => string | Promise<string>), profile: string,
 *   method?: "PUT" | "POST"}} options
 */
export function createUploader({ baseUrl, token, profile, method = "PUT" }) {
  const client = new UpcommitClient({ baseUrl, token });
  const uppy = new Uppy({ autoProceed: false });
  /** @type {Map<string, Promise<import("../upcommit.js").FileHandle>>} commits by Uppy file id */
  const commits = new Map();

  uppy.use(AwsS3, {
    // upcommit starts multipart uploads itself (see above).
    shouldUseMultipart: false,
    // The "key" Uppy asks a signature for is the file's id, so signRequest can find the file;
    // upcommit answers with its own tmp key, which Uppy then uses (`key` in the answer).
    generateObjectKey: (file) => file.id,
    async signRequest(request) {
      if (request.method !== "PUT" || "uploadId" in request) {
        throw new Error(`upcommit presigns single uploads only, not ${request.method} ${"uploadId" in request ? "(multipart)" : ""}`);
      }
      const file = uppy.getFile(request.key);
      const checksum = await sha256Of(file.data); // null outside a secure context
      const presigned = await client.presign({
        profile,
        content_type: file.type || "application/octet-stream",
        size: file.size,
        filename: file.name,
        method,
        ...(checksum ? { checksum } : {}),
      });
      uppy.setFileState(file.id, { upcommit: { upload_id: presigned.upload_id, key: presigned.key } });
      if (presigned.method === "POST") {
        return { url: presigned.url, key: presigned.key, fields: presigned.fields };
      }
      // Every signed header but Content-Length, which the browser sets itself.
      const headers = Object.fromEntries(
        Object.entries(presigned.headers || {}).filter(([k]) => k.toLowerCase() !== "content-length"));
      return { url: presigned.url, key: presigned.key, headers };
    },
  });

  // The bytes are in S3 under upcommit's tmp key: commit it (retried as docs/api.md says).
  uppy.on("upload-success", (file, response) => {
    if (!file) return;
    const committing = client.commit(response.body.key);
    committing.catch(() => {}); // reported by the post-processor below
    commits.set(file.id, committing);
  });
  // Uppy's upload() resolves only after every commit: a post-processing step.
  uppy.addPostProcessor(async (fileIDs) => {
    await Promise.all(fileIDs.map(async (id) => {
      const committing = commits.get(id);
      if (!committing) return;
      const file = uppy.getFile(id);
      try {
        const handle = await committing;
        uppy.setFileState(id, { upcommit: { ...file.upcommit, handle } });
        uppy.emit("postprocess-complete", file);
      } catch (e) {
        uppy.setFileState(id, { upcommit: { ...file.upcommit, error: { code: e.code, message: e.message } } });
        uppy.emit("upload-error", file, e);
      }
    }));
  });
  return uppy;
}

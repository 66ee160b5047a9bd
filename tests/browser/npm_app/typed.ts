// Type-checks against the installed package's upcommit.d.ts (tests/browser/npm_package.mjs).
import { UpcommitClient, UpcommitError, type FileHandle } from "upcommit-client";

export async function send(file: File): Promise<string> {
  const client = new UpcommitClient({ baseUrl: "https://uploads.example.com", token: async () => "token" });
  try {
    const handle: FileHandle = await client.upload(file, {
      profile: "image",
      method: "PUT",
      onProgress: ({ loaded, total }) => console.log(loaded / total),
    });
    return handle.id;
  } catch (e) {
    if (e instanceof UpcommitError) return e.code;
    throw e;
  }
}

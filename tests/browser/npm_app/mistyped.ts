// Must NOT type-check against the installed package's upcommit.d.ts: a method the client does
// not have, and a handle's id (a string) returned as a number (tests/browser/npm_package.mjs).
import { UpcommitClient } from "upcommit-client";

export async function send(file: File): Promise<number> {
  const client = new UpcommitClient({ token: "token" });
  const handle = await client.upload(file, { profile: "image", method: "PATCH" });
  return handle.id;
}

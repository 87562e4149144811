// Validates an AsyncAPI document with the official parser; prints its diagnostics as JSON lines.
// Exit 0: valid (warnings allowed); 1: the parser found errors; 2: usage.
import { readFileSync } from "node:fs";
import { Parser } from "@asyncapi/parser";

const [path] = process.argv.slice(2);
if (!path) {
  console.error("usage: node validate.mjs ASYNCAPI.json");
  process.exit(2);
}
const parser = new Parser();
const { document, diagnostics } = await parser.parse(readFileSync(path, "utf8"));
for (const d of diagnostics) {
  console.log(JSON.stringify({ severity: d.severity, code: d.code, message: d.message, path: d.path }));
}
// severity 0 is an error in the parser's diagnostics (1 warning, 2 information, 3 hint)
const errors = diagnostics.filter((d) => d.severity === 0);
if (!document || errors.length) process.exit(1);
console.log(JSON.stringify({ valid: true, version: document.version(), channels: document.channels().length, messages: document.allMessages().length }));

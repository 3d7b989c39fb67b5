import test from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HOST_NAME } from "../src/config.js";

const ROOT = new URL("..", import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(ROOT, "manifest.json"), "utf8"));

function idFromKey(base64) {
  const hex = createHash("sha256").update(Buffer.from(base64, "base64")).digest("hex").slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join("");
}

test("manifest_is_mv3_with_a_module_service_worker", () => {
  assert.equal(manifest.manifest_version, 3);
  assert.deepEqual(manifest.background, { service_worker: "src/background.js", type: "module" });
  assert.match(manifest.version, /^\d+\.\d+\.\d+$/);
  assert.ok(Number(manifest.minimum_chrome_version) >= 116);
});

test("manifest_key_pins_the_id_in_extension_id_and_protocol_md", () => {
  const der = Buffer.from(manifest.key, "base64");
  assert.ok(der.length > 250, "an RSA-2048 public key in DER");
  const id = idFromKey(manifest.key);
  assert.match(id, /^[a-p]{32}$/);
  assert.equal(readFileSync(join(ROOT, "EXTENSION_ID"), "utf8"), `${id}\n`);
  const protocol = readFileSync(join(ROOT, "../native-host/PROTOCOL.md"), "utf8");
  assert.ok(protocol.includes(`chrome-extension://${id}/`));
});

test("manifest_asks_for_native_messaging_and_the_apis_it_uses", () => {
  for (const permission of ["nativeMessaging", "storage", "unlimitedStorage", "tabs", "webNavigation", "scripting", "bookmarks", "history", "contextMenus", "alarms"]) {
    assert.ok(manifest.permissions.includes(permission), permission);
  }
  assert.deepEqual(manifest.host_permissions, ["http://*/*", "https://*/*"]);
});

test("manifest_never_runs_in_incognito", () => {
  assert.equal(manifest.incognito, "not_allowed");
});

test("every_file_the_manifest_names_exists", () => {
  const files = [manifest.background.service_worker, manifest.action.default_popup, manifest.options_ui.page, ...Object.values(manifest.icons), ...Object.values(manifest.action.default_icon), "src/content/page.js", "src/ui/note.html"];
  for (const file of files) assert.ok(existsSync(join(ROOT, file)), file);
});

test("the_host_name_is_com_backtrail_host", () => {
  assert.equal(HOST_NAME, "com.backtrail.host");
});

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

test("no_private_key_is_shipped", () => {
  for (const file of walk(ROOT)) {
    if (/\.(png)$/.test(file)) continue;
    const text = readFileSync(file, "utf8");
    assert.equal(/PRIVATE KEY/.test(text) && !file.endsWith("manifest.test.js"), false, file);
  }
});

test("only_ext_js_touches_the_chrome_global", () => {
  for (const file of walk(join(ROOT, "src"))) {
    if (!file.endsWith(".js") || file.endsWith("ext.js") || file.endsWith("content/page.js")) continue;
    const code = readFileSync(file, "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/\/\/.*$/gm, "");
    assert.equal(/\bchrome\.(runtime|storage|tabs|tabGroups|windows|scripting|bookmarks|history|action|contextMenus|alarms|webNavigation)\b/.test(code), false, file);
  }
});

// Runs web/app.js outside a browser: the page's DOM, storage and audio are stubbed, the
// server's messages (JSON on argv) go through its onMessage one by one, each followed by
// a render, and what the conversation shows comes out as JSON: [{role, text, meta}].
"use strict";
const fs = require("fs");
const vm = require("vm");

function element() {
  const el = {
    children: [], parts: {}, textContent: "", className: "", hidden: false, removed: false,
    classList: { toggle() {} },
    addEventListener() {},
    appendChild(child) { el.children.push(child); },
    insertBefore(child, next) { el.children.splice(el.children.indexOf(next), 0, child); },
    setAttribute() {},
    scrollIntoView() {},
    remove() { el.removed = true; },
    querySelector(selector) { return (el.parts[selector] ??= element()); },
  };
  return el;
}

const [appPath, messagesJson] = process.argv.slice(2);
const byId = new Map();
let frame = null;
const scope = {
  console,
  document: {
    getElementById: (id) => byId.get(id) ?? byId.set(id, element()).get(id),
    createElement: () => element(),
  },
  location: { protocol: "http:", search: "" },
  sessionStorage: { getItem: () => null, setItem() {} },
  requestAnimationFrame: (callback) => { frame = callback; },
};
scope.window = scope;
vm.createContext(scope);
vm.runInContext(fs.readFileSync(appPath, "utf8"), scope);
scope.voiceState.playback = { port: { postMessage() {} } };
for (const msg of JSON.parse(messagesJson)) {
  vm.runInContext("onMessage", scope)(msg);
  frame();
}
const shown = byId.get("conversation").children.filter((el) => !el.removed);
process.stdout.write(JSON.stringify(shown.map((el) => ({
  role: el.className.replace("turn ", ""),
  text: el.parts[".text"].textContent,
  meta: el.parts[".meta"].textContent,
}))));

// Runs web/playback-worklet.js outside a browser: the AudioWorklet globals are stubbed,
// a scripted list of steps (JSON on argv) drives it, and what it posted comes out as JSON.
// Steps: ["msg", {...}] posts a message to the processor ({"type": "audio", "id", "n"}
// carries n samples of 0.1); ["run", quanta] renders that many 128-frame quanta.
"use strict";
const fs = require("fs");
const vm = require("vm");

const [workletPath, stepsJson] = process.argv.slice(2);
const posted = [];
let Processor = null;
const scope = {
  sampleRate: 48000,
  currentTime: 0,
  AudioWorkletProcessor: class {
    constructor() {
      this.port = { postMessage: (m) => posted.push(m), onmessage: null };
    }
  },
  registerProcessor: (_name, cls) => {
    Processor = cls;
  },
};
vm.createContext(scope);
vm.runInContext(fs.readFileSync(workletPath, "utf8"), scope);
const proc = new Processor({ processorOptions: { sourceRate: 16000 } });
for (const [kind, arg] of JSON.parse(stepsJson)) {
  if (kind === "msg") {
    const data = arg.type === "audio" ? { ...arg, samples: new Float32Array(arg.n).fill(0.1) } : arg;
    proc.port.onmessage({ data });
  } else if (kind === "run") {
    for (let q = 0; q < arg; q++) {
      proc.process([], [[new Float32Array(128)]]);
      scope.currentTime += 128 / scope.sampleRate;
    }
  }
}
process.stdout.write(JSON.stringify(posted));

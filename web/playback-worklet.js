// Reply audio out: a small jitter buffer that flushes at once on clear (the audio thread).
//
// The server sends each reply's audio at about real time with a ~200 ms lead.
// A new reply starts once JITTER_MS of it is buffered (or its audio stops
// coming), so a late packet does not click. Samples arrive at the source
// rate and are played at the context rate by linear interpolation (upsampling:
// no aliasing to fear). The processor reports, per reply, how many source
// samples it has played, and when the first one went out, on the audio clock.

const CAPACITY = 1 << 18; // source samples (16 s at 16 kHz); the server leads by far less
const JITTER_MS = 60;
const REPORT_EVERY = 8; // render quanta (~20 ms at 48 kHz)

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.sourceRate = options.processorOptions.sourceRate;
    this.step = this.sourceRate / sampleRate;
    this.samples = new Float32Array(CAPACITY);
    this.ids = new Int32Array(CAPACITY);
    this.write = 0; // ring positions, counted in source samples (never wrapped)
    this.read = 0; // integer part of the read position
    this.frac = 0;
    this.paused = new Set();
    this.cleared = new Set();
    this.played = new Map(); // reply id -> source samples played
    this.reported = new Map(); // reply id -> samples last reported
    this.started = new Set();
    this.waitingSince = -1;
    this.quanta = 0;
    this.port.onmessage = (e) => this.onMessage(e.data);
  }

  onMessage(msg) {
    if (msg.type === "audio") {
      if (this.cleared.has(msg.id)) return;
      const data = msg.samples;
      for (let i = 0; i < data.length && this.write - this.read < CAPACITY - 1; i++) {
        const at = this.write++ & (CAPACITY - 1);
        this.samples[at] = data[i];
        this.ids[at] = msg.id;
      }
    } else if (msg.type === "clear") {
      this.cleared.add(msg.id);
      while (this.read < this.write && this.ids[this.read & (CAPACITY - 1)] === msg.id) this.read++;
      this.frac = 0;
    } else if (msg.type === "pause") {
      this.paused.add(msg.id);
    } else if (msg.type === "resume") {
      this.paused.delete(msg.id);
    } else if (msg.type === "reset") {
      // A new session numbers its replies from 1 again: nothing of the old ones may
      // drop, pause or miscount them.
      this.read = this.write;
      this.frac = 0;
      this.paused.clear();
      this.cleared.clear();
      this.played.clear();
      this.reported.clear();
      this.started.clear();
      this.waitingSince = -1;
    }
  }

  at(position) {
    return this.samples[position & (CAPACITY - 1)];
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    out.fill(0);
    const buffered = this.write - this.read;
    if (buffered > 0) {
      const id = this.ids[this.read & (CAPACITY - 1)];
      let ready = this.started.has(id) || buffered >= (this.sourceRate * JITTER_MS) / 1000;
      if (!ready) {
        if (this.waitingSince < 0) this.waitingSince = currentTime;
        ready = currentTime - this.waitingSince >= JITTER_MS / 1000; // a short reply
      }
      if (ready && !this.paused.has(id)) this.render(out, id);
    }
    if (++this.quanta % REPORT_EVERY === 0) this.report();
    return true;
  }

  render(out, id) {
    this.waitingSince = -1;
    if (!this.started.has(id)) {
      this.started.add(id);
      this.port.postMessage({ type: "start", id, t: currentTime });
    }
    let n = 0;
    for (; n < out.length; n++) {
      if (this.read + 1 > this.write) break; // underrun: play silence, wait for more
      const here = this.ids[this.read & (CAPACITY - 1)];
      if (here !== id) break; // the next reply starts in a later quantum
      const a = this.at(this.read);
      const b = this.read + 1 < this.write ? this.at(this.read + 1) : a;
      out[n] = a + (b - a) * this.frac;
      this.frac += this.step;
      while (this.frac >= 1) {
        this.frac -= 1;
        this.read++;
        this.played.set(id, (this.played.get(id) || 0) + 1);
      }
    }
  }

  report() {
    for (const [id, samples] of this.played) {
      if (this.reported.get(id) !== samples && !this.cleared.has(id)) {
        this.port.postMessage({ type: "played", id, samples });
        this.reported.set(id, samples);
      }
    }
    if (this.played.size > 16) {
      const oldest = this.played.keys().next().value;
      this.played.delete(oldest);
      this.reported.delete(oldest);
    }
  }
}

registerProcessor("playback", PlaybackProcessor);

// Microphone -> 20 ms PCM16 frames at the negotiated rate (the audio thread).
//
// The page's AudioContext runs at the device rate (44.1 or 48 kHz here), the
// server wants the negotiated rate (16 kHz). Downsampling needs a low-pass
// first or consonants alias into the speech band, so: a windowed-sinc FIR at
// the input rate, then linear interpolation at the output positions.

const TAPS = 63;

function lowPass(cutoff) {
  // cutoff as a fraction of the input rate (0..0.5); Blackman-windowed sinc, unit gain.
  const h = new Float32Array(TAPS);
  const mid = (TAPS - 1) / 2;
  let sum = 0;
  for (let i = 0; i < TAPS; i++) {
    const x = i - mid;
    const sinc = x === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * x) / (Math.PI * x);
    const w = 0.42 - 0.5 * Math.cos((2 * Math.PI * i) / (TAPS - 1)) + 0.08 * Math.cos((4 * Math.PI * i) / (TAPS - 1));
    h[i] = sinc * w;
    sum += h[i];
  }
  for (let i = 0; i < TAPS; i++) h[i] /= sum;
  return h;
}

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { targetRate, frameMs } = options.processorOptions;
    this.step = sampleRate / targetRate; // input samples per output sample
    this.frame = new Int16Array(Math.round((targetRate * frameMs) / 1000));
    this.filled = 0;
    this.sumSquares = 0;
    this.filter = this.step > 1 ? lowPass(0.45 / this.step) : null;
    this.history = new Float32Array(TAPS); // last inputs, for the FIR
    this.prev = 0; // last filtered sample of the previous block
    this.pos = 0; // next output position, in input samples from this block's start
    this.running = true;
    this.port.onmessage = (e) => {
      if (e.data === "stop") this.running = false;
    };
  }

  filtered(block) {
    if (!this.filter) return block;
    const h = this.filter;
    const out = new Float32Array(block.length);
    const hist = this.history;
    for (let n = 0; n < block.length; n++) {
      hist.copyWithin(0, 1);
      hist[TAPS - 1] = block[n];
      let acc = 0;
      for (let k = 0; k < TAPS; k++) acc += h[k] * hist[k];
      out[n] = acc;
    }
    return out;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return this.running;
    const x = this.filtered(channel);
    let t = this.pos;
    while (t < x.length - 1) {
      const i = Math.floor(t);
      const f = t - i;
      const a = i < 0 ? this.prev : x[i];
      const b = x[i + 1];
      this.push(a + (b - a) * f);
      t += this.step;
    }
    this.pos = t - x.length;
    this.prev = x[x.length - 1];
    return this.running;
  }

  push(sample) {
    const s = Math.max(-1, Math.min(32767 / 32768, sample));
    this.frame[this.filled++] = Math.round(s * 32768);
    this.sumSquares += s * s;
    if (this.filled === this.frame.length) {
      const rms = Math.sqrt(this.sumSquares / this.filled);
      const pcm = this.frame.slice().buffer;
      // currentTime is the start of this render quantum: close enough to the frame's end.
      this.port.postMessage({ pcm, rms, t: currentTime }, [pcm]);
      this.filled = 0;
      this.sumSquares = 0;
    }
  }
}

registerProcessor("capture", CaptureProcessor);

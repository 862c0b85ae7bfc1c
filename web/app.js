// The voice web client: microphone up, reply audio down, the conversation on screen.
// Protocol: web/PROTOCOL.md. No build step; two AudioWorklets do the audio work.

const PROTOCOL = 1;
const RATE = 16000; // what we ask the server for; the worklets convert from and to the device rate
const FRAME_MS = 20;
const MAX_RETRY_S = 10;
// Microphone frames kept until the connection is ready: under the 1 s the server admits
// ahead of real time (limits.burst_s), or the rest would be dropped there.
const EARLY_MAX_FRAMES = 800 / FRAME_MS;

// Tools this page declares in its hello (PROTOCOL.md, "Tools declared by a page"): the
// assistant may call them when the user asks; the page runs them and answers with a
// short result, which the assistant says.
const TOOLS = [
  {
    name: "switch_light",
    description: "Switch the light on or off.",
    parameters: {
      type: "object",
      properties: { state: { type: "string", enum: ["on", "off"] } },
      required: ["state"],
    },
    examples: ["turn on the light", "switch the light off", "lights on please", "it's too dark in here"],
  },
];
const TOOL_RUN = {
  switch_light: ({ state }) => {
    S.light = state;
    return `The light is ${state}.`;
  },
};

const $ = (id) => document.getElementById(id);
const ui = {
  toggle: $("toggle"),
  talk: $("talk"),
  state: $("state"),
  notice: $("notice"),
  conversation: $("conversation"),
  partial: $("partial"),
  lastLatency: $("last-latency"),
  summary: $("latency-summary"),
  light: $("light"),
};

// Everything the page knows; rendered in animation frames. Exposed for tests and curious people.
const S = {
  running: false,
  starting: false, // start() is waiting (the permission prompt, the worklets)
  ready: false,
  ws: null,
  ctx: null,
  stream: null,
  capture: null,
  playback: null,
  state: "idle",
  partial: "",
  notice: "",
  turns: [], // {role, text, meta, el, dirty}; a user turn from a final also has its uid
  replies: new Map(), // reply id -> {turn, chunks, heard, speechEndT, ended}
  pendingSpeechEndT: null,
  latencies: [], // voice-to-voice in ms, measured here
  serverMetrics: [], // turn_metrics events: the server's own view of each turn
  micT0: null,
  early: [], // microphone frames from before the connection was ready: the last 0.8 s
  framesSent: 0,
  micPeak: 0,
  playedSamples: 0,
  stops: 0,
  retry: 0,
  goingAway: false, // the server said it is draining: reconnect at once, not after a backoff
  // The conversation to go on with after a reconnect (any server behind the same balancer
  // that shares the store); kept for this tab, so a reload goes on too.
  conversationId: stored("voice.conversation"),
  talking: false, // push-to-talk button held (the first press turns push-to-talk on)
  pushToTalk: false, // the button was used: every new session listens only while held
  light: "off", // what the page's own tool switches
  toolCalls: [], // {id, name, arguments, status, result, turn}: the calls as they happen
  dirty: true,
};
window.voiceState = S;

// sessionStorage, where the page may use it (a sandboxed frame may not: then the id
// lives only as long as the page).
function stored(key, value) {
  try {
    if (value === undefined) return sessionStorage.getItem(key) || null;
    sessionStorage.setItem(key, value);
  } catch {
    // not allowed here
  }
  return value ?? null;
}

function setNotice(text) {
  S.notice = text;
  S.dirty = true;
}

function wsUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  // A server started with --token wants it back: the page was opened as /?token=...
  const token = new URLSearchParams(location.search).get("token");
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  return `${scheme}//${location.host}/ws${query}`;
}

// -- start and stop -------------------------------------------------------------------

async function start() {
  // A second press while the first start waits (the permission prompt, loading the
  // worklets) would open a second microphone, audio graph and session.
  if (S.starting || S.running) return;
  S.starting = true;
  ui.toggle.disabled = true;
  try {
    await startAudio();
  } finally {
    S.starting = false;
    ui.toggle.disabled = false;
  }
}

async function startAudio() {
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    setNotice("This page needs microphone access, which browsers allow only on https:// or http://localhost.");
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
  } catch (err) {
    const denied = err && (err.name === "NotAllowedError" || err.name === "SecurityError");
    const missing = err && err.name === "NotFoundError";
    setNotice(
      denied
        ? "Microphone access was denied. Allow it for this site in the browser's settings, then press Start again."
        : missing
          ? "No microphone was found. Plug one in, then press Start again."
          : `The microphone could not be opened (${err && err.name}). Close other apps using it and try again.`,
    );
    return;
  }
  const ctx = new AudioContext({ latencyHint: "interactive" });
  try {
    await ctx.audioWorklet.addModule("capture-worklet.js");
    await ctx.audioWorklet.addModule("playback-worklet.js");
  } catch (err) {
    stream.getTracks().forEach((t) => t.stop()); // the microphone is not left on
    ctx.close();
    setNotice(`The page's audio code could not load (${err && err.message}). Reload the page and press Start again.`);
    return;
  }
  const capture = new AudioWorkletNode(ctx, "capture", {
    numberOfOutputs: 1,
    processorOptions: { targetRate: RATE, frameMs: FRAME_MS },
  });
  const mute = ctx.createGain();
  mute.gain.value = 0; // the capture node must be pulled by the graph to run
  ctx.createMediaStreamSource(stream).connect(capture).connect(mute).connect(ctx.destination);
  const playback = new AudioWorkletNode(ctx, "playback", {
    numberOfInputs: 0,
    outputChannelCount: [1],
    processorOptions: { sourceRate: RATE },
  });
  playback.connect(ctx.destination);
  capture.port.onmessage = (e) => onMicFrame(e.data);
  playback.port.onmessage = (e) => onPlayback(e.data);
  await ctx.resume();
  Object.assign(S, { running: true, ctx, stream, capture, playback, retry: 0 });
  setNotice("");
  connect();
}

function stop() {
  S.running = false;
  S.ready = false;
  if (S.ws) S.ws.close(1000, "stopped");
  if (S.stream) S.stream.getTracks().forEach((t) => t.stop());
  if (S.capture) S.capture.port.postMessage("stop");
  if (S.ctx) S.ctx.close();
  Object.assign(S, { ws: null, stream: null, ctx: null, capture: null, playback: null, state: "idle", partial: "", early: [] });
  S.dirty = true;
}

// -- the socket ---------------------------------------------------------------------------

function connect() {
  const ws = new WebSocket(wsUrl());
  ws.binaryType = "arraybuffer";
  S.ws = ws;
  ws.onopen = () => {
    const hello = { type: "hello", protocol: PROTOCOL, sample_rate: RATE, format: "pcm16", tools: TOOLS };
    if (S.conversationId) hello.conversation_id = S.conversationId;
    ws.send(JSON.stringify(hello));
  };
  ws.onmessage = (e) => {
    if (typeof e.data === "string") onMessage(JSON.parse(e.data));
    else onAudio(e.data);
  };
  ws.onclose = (e) => {
    if (S.ws !== ws) return;
    S.ready = false;
    S.state = "idle";
    S.dirty = true;
    if (!S.running) return;
    // 1001 (with a going_away message): this server is draining, the conversation goes
    // on at once on another one (the load balancer picks it).
    if (e.code === 1001 || S.goingAway) {
      S.goingAway = false;
      setNotice("The server is restarting; reconnecting…");
      connect();
      return;
    }
    const delay = Math.min(MAX_RETRY_S, 0.5 * 2 ** S.retry++);
    const why = e.code === 1013 ? "The server is busy (all sessions taken)." : "The connection to the server was lost.";
    setNotice(`${why} Reconnecting in ${delay.toFixed(1)} s…`);
    setTimeout(() => S.running && S.ws === ws && connect(), delay * 1000);
  };
}

function onMessage(msg) {
  switch (msg.type) {
    case "ready":
      S.ready = true;
      S.retry = 0;
      S.micT0 = null;
      S.framesSent = 0;
      S.playback.port.postMessage({ type: "reset" });
      if (msg.conversation_id) {
        S.conversationId = msg.conversation_id;
        stored("voice.conversation", msg.conversation_id);
      }
      if (S.pushToTalk) S.ws.send(JSON.stringify({ type: "talk", down: S.talking }));
      setNotice("");
      break;
    case "state":
      S.state = msg.state;
      break;
    case "partial":
      S.partial = `${msg.committed} ${msg.unstable}`.trim();
      break;
    case "final":
      S.partial = "";
      if (msg.text.trim()) addTurn("user", msg.text.trim()).uid = msg.utterance_id;
      // The end of the user's speech on this page's audio clock: audio time is samples sent.
      if (S.micT0 !== null) S.pendingSpeechEndT = S.micT0 + msg.end_ms / 1000;
      break;
    case "reply_start": {
      const turn = addTurn("assistant", "");
      S.replies.set(msg.reply_id, { turn, chunks: [], total: 0, heard: 0, speechEndT: S.pendingSpeechEndT, ended: false });
      S.pendingSpeechEndT = null;
      break;
    }
    case "audio_chunk": {
      const reply = S.replies.get(msg.reply_id);
      if (reply) {
        reply.chunks.push({ start: reply.total, text: msg.text });
        reply.total += Math.round((msg.duration_ms * RATE) / 1000);
      }
      break;
    }
    case "reply_end": {
      const reply = S.replies.get(msg.reply_id);
      if (reply) {
        reply.ended = true;
        reply.turn.text = msg.interrupted ? `${msg.heard_text} …` : msg.text.trim();
        if (msg.interrupted) reply.turn.meta = "interrupted";
        reply.turn.dirty = true;
      }
      break;
    }
    case "pause":
    case "resume":
    case "clear":
      S.playback.port.postMessage({ type: msg.type, id: msg.reply_id });
      if (msg.type !== "resume") S.stops++;
      break;
    case "turn_continued": {
      // The cut reply and the fragment it answered give way to the whole turn's final.
      const reply = S.replies.get(msg.reply_id);
      const at = reply ? S.turns.indexOf(reply.turn) : -1;
      if (at > 0 && S.turns[at - 1].role === "user") {
        for (const gone of S.turns.splice(at - 1, 2)) gone.el?.remove();
      }
      break;
    }
    case "turn_restored": {
      // What joined the turn was only a "stop": the exchange taken off on turn_continued
      // is back as far as it was heard, and the stop follows it, in place of the whole
      // turn's final.
      const at = S.turns.findLastIndex((t) => t.role === "user" && t.uid === msg.utterance_id);
      if (at >= 0) for (const gone of S.turns.splice(at, 1)) gone.el?.remove();
      addTurn("user", msg.user_text);
      if (msg.heard_text) Object.assign(addTurn("assistant", `${msg.heard_text} …`), { meta: "interrupted" });
      addTurn("user", msg.stop_text.charAt(0).toUpperCase() + msg.stop_text.slice(1));
      break;
    }
    case "turn_metrics":
      S.serverMetrics.push(msg);
      break;
    case "tool_call": {
      // Shown before the reply it belongs to; with time_limit_ms it is one of this
      // page's tools, which the page runs and answers now.
      const turn = { role: "tool", text: describeCall(msg), meta: "…", el: null, dirty: true };
      const reply = S.replies.get(msg.reply_id);
      const at = reply ? S.turns.indexOf(reply.turn) : -1;
      S.turns.splice(at < 0 ? S.turns.length : at, 0, turn);
      S.toolCalls.push({ id: msg.call_id, name: msg.name, arguments: msg.arguments, status: "running", result: "", turn });
      if (msg.time_limit_ms !== undefined) answerTool(msg);
      break;
    }
    case "tool_result": {
      const call = S.toolCalls.find((c) => c.id === msg.call_id);
      if (call) {
        Object.assign(call, { status: msg.status, result: msg.result });
        call.turn.meta = msg.status === "ok" ? msg.result : msg.status;
        call.turn.dirty = true;
      }
      break;
    }
    case "error":
      if (msg.code === "conversation_not_found") {
        // After a reconnect: the server no longer has the conversation (expired, or a
        // server without a shared store). Say so in the user's words, not the protocol's.
        setNotice("The conversation could not be continued; a new one has started.");
      } else if (msg.code === "store_unavailable") {
        console.warn(msg.message); // nothing for the user to do: the conversation goes on
      } else if (msg.code !== "bad_message") {
        setNotice(`Server: ${msg.message}`);
      }
      break;
    case "going_away":
      S.goingAway = true; // the close (1001) follows; reconnect then, without waiting
      break;
    default:
      break; // speculation, metrics and other events are not shown
  }
  S.dirty = true;
}

function describeCall(msg) {
  const args = Object.entries(msg.arguments || {}).map(([k, v]) => `${k}: ${v}`);
  return `${msg.name}(${args.join(", ")})`;
}

function answerTool(msg) {
  const run = TOOL_RUN[msg.name];
  let answer;
  try {
    answer = run ? { result: String(run(msg.arguments || {}) ?? "done") } : { error: `this page has no tool ${msg.name}` };
  } catch (err) {
    answer = { error: String((err && err.message) || err) };
  }
  if (S.ws && S.ready) S.ws.send(JSON.stringify({ type: "tool_result", call_id: msg.call_id, ...answer }));
}

function onAudio(buffer) {
  const view = new DataView(buffer);
  const id = view.getUint32(0, true);
  const pcm = new Int16Array(buffer, 8);
  const samples = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 32768;
  S.playback.port.postMessage({ type: "audio", id, samples }, [samples.buffer]);
}

function onMicFrame({ pcm, rms, t }) {
  S.micPeak = Math.max(S.micPeak, rms);
  const ws = S.ws;
  if (!S.ready || !ws || ws.readyState !== WebSocket.OPEN) {
    // Said before the connection is ready (Start pressed, then straight into speech):
    // the microphone runs first, and dropping these lost a first "I am glad".
    S.early.push({ pcm, t });
    if (S.early.length > EARLY_MAX_FRAMES) S.early.shift();
    return;
  }
  for (const frame of S.early.splice(0)) sendFrame(ws, frame.pcm, frame.t);
  sendFrame(ws, pcm, t);
}

function sendFrame(ws, pcm, t) {
  if (S.micT0 === null) S.micT0 = t + 128 / S.ctx.sampleRate - FRAME_MS / 1000;
  ws.send(pcm);
  S.framesSent++;
}

function onPlayback(msg) {
  const reply = S.replies.get(msg.id);
  if (msg.type === "start" && reply) {
    const playedT = msg.t + (S.ctx.outputLatency || 0);
    if (reply.speechEndT !== null) {
      S.latencies.push(Math.round((playedT - reply.speechEndT) * 1000));
      reply.turn.meta = `${S.latencies.at(-1)} ms`;
      reply.turn.dirty = true;
    }
  } else if (msg.type === "played") {
    if (S.ws && S.ready) S.ws.send(JSON.stringify({ type: "played", reply_id: msg.id, samples: msg.samples }));
    if (reply) {
      S.playedSamples += Math.max(0, msg.samples - reply.heard);
      reply.heard = msg.samples;
      const spoken = reply.chunks.filter((c) => c.start < msg.samples).map((c) => c.text);
      if (!reply.ended) {
        reply.turn.text = spoken.join(" ");
        reply.turn.dirty = true;
      }
    }
  }
  S.dirty = true;
}

// -- rendering (animation frames only) --------------------------------------------------

function addTurn(role, text) {
  const turn = { role, text, meta: "", el: null, dirty: true };
  S.turns.push(turn);
  return turn;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function render() {
  requestAnimationFrame(render);
  if (!S.dirty) return;
  S.dirty = false;
  ui.state.textContent = S.state.replace("_", " ");
  ui.state.className = `state ${S.state}`;
  ui.notice.hidden = !S.notice;
  ui.notice.textContent = S.notice;
  ui.partial.textContent = S.partial;
  ui.toggle.textContent = S.running ? "Stop" : "Start";
  ui.toggle.classList.toggle("running", S.running);
  ui.talk.hidden = !S.running;
  ui.talk.classList.toggle("held", S.talking);
  ui.light.classList.toggle("on", S.light === "on");
  ui.light.title = `The light is ${S.light}: ask the assistant to switch it.`;
  ui.light.setAttribute("aria-label", `light ${S.light}`);
  for (const turn of S.turns) {
    if (!turn.dirty) continue;
    turn.dirty = false;
    if (!turn.el) {
      turn.el = document.createElement("div");
      turn.el.className = `turn ${turn.role}`;
      turn.el.innerHTML = '<span class="bubble"><span class="text"></span><span class="meta"></span></span>';
      // In its place among the turns (a tool call goes before its reply's bubble).
      const next = S.turns.slice(S.turns.indexOf(turn) + 1).find((t) => t.el);
      if (next) ui.conversation.insertBefore(turn.el, next.el);
      else ui.conversation.appendChild(turn.el);
      turn.el.scrollIntoView({ block: "end" });
    }
    turn.el.querySelector(".text").textContent = turn.text || "…";
    turn.el.querySelector(".meta").textContent = turn.meta;
  }
  const n = S.latencies.length;
  ui.lastLatency.textContent = n ? `voice-to-voice ${S.latencies[n - 1]} ms` : "–";
  ui.summary.textContent = n > 1 ? `p50 ${percentile(S.latencies, 50)} ms · p95 ${percentile(S.latencies, 95)} ms (${n} turns)` : "";
}

ui.toggle.addEventListener("click", () => (S.running ? stop() : start()));

// Push-to-talk (a kiosk in a noisy hall): hold the button while speaking; releasing it
// ends the turn at once. Until it is first pressed, the page is always listening.
function talk(down) {
  if (S.talking === down) return;
  S.talking = down;
  S.pushToTalk = true; // kept across reconnects: a new session is told on "ready"
  S.dirty = true;
  if (S.ws && S.ready) S.ws.send(JSON.stringify({ type: "talk", down }));
}
ui.talk.addEventListener("pointerdown", (e) => { e.preventDefault(); talk(true); });
for (const end of ["pointerup", "pointercancel", "pointerleave"]) {
  ui.talk.addEventListener(end, () => talk(false));
}
requestAnimationFrame(render);

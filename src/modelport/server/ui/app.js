// The playground: every call goes through the public OpenAI API at /v1, as any client's would.

const API = "/v1";
const $ = (selector, root = document) => root.querySelector(selector);
let apiKey = sessionStorage.getItem("modelport-key") || "";
let models = [];

const EXAMPLE_TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The current weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
        required: ["city"],
      },
    },
  },
];

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(path, { body, form, signal } = {}) {
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(API + path, {
    method: body !== undefined || form ? "POST" : "GET",
    headers,
    body: form ?? (body !== undefined ? JSON.stringify(body) : undefined),
    signal,
  });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = (await response.json()).error.message;
    } catch {}
    if (response.status === 401) askForKey(message);
    throw new ApiError(response.status, message);
  }
  return response;
}

// Server-sent events: each `data:` line's JSON, until `[DONE]`.
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        const parsed = JSON.parse(data);
        if (parsed.error) throw new ApiError(0, parsed.error.message);
        yield parsed;
      }
    }
  }
}

function showError(form, error) {
  $(".error", form).textContent = error ? (error.message || String(error)) : "";
}

function element(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

// --- API key ---------------------------------------------------------------------------------------------

function askForKey(message) {
  const form = $("#key");
  form.hidden = false;
  $(".error", form).textContent = apiKey ? message : "";
  $("#api-key").focus();
}

$("#key").addEventListener("submit", async (event) => {
  event.preventDefault();
  apiKey = $("#api-key").value.trim();
  sessionStorage.setItem("modelport-key", apiKey);
  if (await loadModels()) $("#key").hidden = true;
});

// --- models ----------------------------------------------------------------------------------------------

async function loadModels() {
  try {
    models = (await (await call("/models")).json()).data;
  } catch (error) {
    if (error.status !== 401) showError($("#chat-form"), error);
    return false;
  }
  for (const select of document.querySelectorAll("select[data-capability]")) {
    const wanted = select.dataset.capability;
    // A model not loaded yet does not say what it serves: offer it everywhere.
    const fit = models.filter((m) => !m.capabilities || m.capabilities.includes(wanted));
    select.replaceChildren(...fit.map((m) => element("option", { value: m.id, textContent: m.id })));
  }
  showVoices();
  showCode();
  return true;
}

// The chosen chat model called from code, as each client a user may have calls it: the server's three faces.
function showCode() {
  const model = $("#chat-form").model.value;
  const origin = location.origin;
  const key = apiKey ? "YOUR_KEY" : "unused";
  const hi = '[{"role": "user", "content": "Hi!"}]';
  $("#chat-code code").textContent = [
    "# OpenAI's SDK",
    "from openai import OpenAI",
    `client = OpenAI(base_url="${origin}/v1", api_key="${key}")`,
    `print(client.chat.completions.create(model="${model}", messages=${hi}).choices[0].message.content)`,
    "",
    "# Anthropic's SDK (Claude Code: ANTHROPIC_BASE_URL=" + origin + ")",
    "import anthropic",
    `client = anthropic.Anthropic(base_url="${origin}", api_key="${key}")`,
    `print(client.messages.create(model="${model}", max_tokens=256, messages=${hi}).content[0].text)`,
    "",
    "# Ollama's client",
    "import ollama",
    `client = ollama.Client(host="${origin}"${apiKey ? ', headers={"Authorization": "Bearer YOUR_KEY"}' : ""})`,
    `print(client.chat(model="${model}", messages=${hi}).message.content)`,
    "",
    "# curl",
    `curl ${origin}/v1/chat/completions -H "Content-Type: application/json"` +
      (apiKey ? ' -H "Authorization: Bearer YOUR_KEY"' : "") +
      ` -d '{"model": "${model}", "messages": ${hi}}'`,
  ].join("\n");
}
$("#chat-form").model.addEventListener("change", showCode);

function showVoices() {
  const model = models.find((m) => m.id === $("#speech-form").model.value);
  const voices = model?.voices ?? ["alloy"];
  $("#speech-form").voice.replaceChildren(...voices.map((v) => element("option", { value: v, textContent: v })));
}
$("#speech-form").model.addEventListener("change", showVoices);

// --- tabs ------------------------------------------------------------------------------------------------

const tabs = [...document.querySelectorAll('[role="tab"]')];
function selectTab(tab) {
  for (const other of tabs) {
    const chosen = other === tab;
    other.setAttribute("aria-selected", String(chosen));
    other.tabIndex = chosen ? 0 : -1;
    document.getElementById(other.getAttribute("aria-controls")).hidden = !chosen;
  }
  tab.focus();
}
for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (step) selectTab(tabs[(tabs.indexOf(tab) + step + tabs.length) % tabs.length]);
  });
}

// --- chat ------------------------------------------------------------------------------------------------

const chatForm = $("#chat-form");
chatForm.tools.value = JSON.stringify(EXAMPLE_TOOLS, null, 2);
let history = [];
let running = null;
let attachments = []; // what goes with the next message: { image: dataUrl, name } or { audio: base64 WAV, seconds }
let player = null;

function addTurn(role, text, attached = []) {
  const turn = element("li", { className: `turn ${role}` }, element("span", { className: "role", textContent: role }));
  const content = element("div", { className: "content", textContent: text });
  turn.append(content, ...attached.map(attachmentView));
  $("#transcript").append(turn);
  return { turn, content };
}

function attachmentView(item) {
  if (item.image) return element("span", { className: "attached" }, element("img", { src: item.image, alt: item.name }));
  return element("span", { className: "attached", textContent: `recorded audio, ${item.seconds.toFixed(1)} s` });
}

function showAttachments() {
  $("#attachments").replaceChildren(
    ...attachments.map((item, i) => {
      const remove = element("button", { type: "button", textContent: "×", title: "Remove" });
      remove.setAttribute("aria-label", `Remove ${item.image ? item.name : "the recording"}`);
      remove.addEventListener("click", () => {
        attachments.splice(i, 1);
        showAttachments();
      });
      return element("li", {}, attachmentView(item), remove);
    }),
  );
}

const asDataUrl = (blob) =>
  new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });

async function attachImages(files) {
  for (const file of files) attachments.push({ image: await asDataUrl(file), name: file.name || "pasted image" });
  showAttachments();
}

chatForm.image.addEventListener("change", async () => {
  await attachImages([...chatForm.image.files]);
  chatForm.image.value = "";
});
chatForm.message.addEventListener("paste", async (event) => {
  const images = [...event.clipboardData.items].filter((i) => i.type.startsWith("image/")).map((i) => i.getAsFile());
  if (images.length) {
    event.preventDefault();
    await attachImages(images);
  }
});

// A recording as a 16-bit mono WAV (chat's `input_audio` takes wav or mp3, which browsers do not record).
function wav(buffer) {
  const samples = new Float32Array(buffer.length);
  for (let c = 0; c < buffer.numberOfChannels; c++) {
    buffer.getChannelData(c).forEach((v, i) => (samples[i] += v / buffer.numberOfChannels));
  }
  const view = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (at, s) => [...s].forEach((ch, i) => view.setUint8(at + i, ch.charCodeAt(0)));
  text(0, "RIFF");
  view.setUint32(4, 36 + samples.length * 2, true);
  text(8, "WAVEfmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, buffer.sampleRate, true);
  view.setUint32(28, buffer.sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  text(36, "data");
  view.setUint32(40, samples.length * 2, true);
  samples.forEach((v, i) => view.setInt16(44 + i * 2, Math.max(-1, Math.min(1, v)) * 0x7fff, true));
  return view.buffer;
}

function base64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

let chatRecording = null;
$("#chat-record").addEventListener("click", async () => {
  if (chatRecording) {
    chatRecording.stop();
    return;
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const parts = [];
    chatRecording = new MediaRecorder(stream);
    chatRecording.ondataavailable = (event) => parts.push(event.data);
    chatRecording.onstop = async () => {
      stream.getTracks().forEach((track) => track.stop());
      chatRecording = null;
      $("#chat-record").textContent = "Record audio";
      try {
        const decoded = await new AudioContext().decodeAudioData(await new Blob(parts).arrayBuffer());
        attachments.push({ audio: base64(new Uint8Array(wav(decoded))), seconds: decoded.duration });
        showAttachments();
      } catch (error) {
        showError(chatForm, new Error(`The recording could not be read: ${error.message}`));
      }
    };
    chatRecording.start();
    $("#chat-record").textContent = "Stop recording";
  } catch (error) {
    showError(chatForm, new Error(`The microphone is not available: ${error.message}`));
  }
});

// Spoken answers stream as 16-bit PCM at 24 kHz, each piece queued to play after the one before.
class PcmPlayer {
  constructor() {
    this.context = new AudioContext({ sampleRate: 24000 });
    this.at = 0;
    this.seconds = 0;
    this.sources = [];
  }
  play(data) {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const pcm = new Int16Array(bytes.buffer, 0, bytes.length >> 1);
    if (!pcm.length) return;
    const buffer = this.context.createBuffer(1, pcm.length, 24000);
    buffer.getChannelData(0).set(Float32Array.from(pcm, (v) => v / 32768));
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    this.at = Math.max(this.at, this.context.currentTime);
    source.start(this.at);
    this.at += buffer.duration;
    this.seconds += buffer.duration;
    this.sources.push(source);
  }
  stop() {
    this.sources.forEach((source) => source.stop());
    if (this.context.state !== "closed") this.context.close().catch(() => {});
  }
}

chatForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (running) return;
  showError(chatForm, null);
  const message = chatForm.message.value.trim();
  if (!message && !attachments.length) return;
  chatForm.message.value = "";
  const attached = attachments;
  attachments = [];
  showAttachments();
  addTurn("user", message, attached);
  const parts = attached.map((a) =>
    a.image
      ? { type: "image_url", image_url: { url: a.image } }
      : { type: "input_audio", input_audio: { data: a.audio, format: "wav" } },
  );
  history.push({ role: "user", content: parts.length ? [...(message ? [{ type: "text", text: message }] : []), ...parts] : message });
  const body = {
    model: chatForm.model.value,
    messages: [...(chatForm.system.value.trim() ? [{ role: "system", content: chatForm.system.value }] : []), ...history],
    temperature: Number(chatForm.temperature.value),
    max_tokens: Number(chatForm.max_tokens.value),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (chatForm.json.checked) body.response_format = { type: "json_object" };
  if (chatForm.use_tools.checked) {
    try {
      body.tools = JSON.parse(chatForm.tools.value);
    } catch (error) {
      showError(chatForm, new Error(`The tools are not valid JSON: ${error.message}`));
      history.pop();
      return;
    }
    body.tool_choice = chatForm.tool_choice.value;
  }
  if (chatForm.speak.checked) {
    body.modalities = ["text", "audio"];
    body.audio = { voice: chatForm.voice.value, format: "pcm16" };
    player?.stop();
    player = new PcmPlayer();
  }
  const speaking = player && chatForm.speak.checked ? player : null;
  let audioId = null;
  const { turn, content } = addTurn("assistant", "");
  const stats = element("p", { className: "stats" });
  turn.append(stats);
  running = new AbortController();
  $("#chat-stop").disabled = false;
  const started = performance.now();
  let first = null;
  let chunks = 0;
  let usage = null;
  const calls = [];
  let thinking = null; // the model's thinking, folded away above its answer
  try {
    const response = await call("/chat/completions", { body, signal: running.signal });
    for await (const chunk of events(response)) {
      usage = chunk.usage ?? usage;
      const delta = chunk.choices?.[0]?.delta;
      if (!delta) continue;
      first ??= performance.now(); // the role arrives with the model's first token
      const thought = delta.reasoning_content ?? delta.reasoning;
      if (delta.content || thought || delta.tool_calls || delta.audio?.transcript) turn.dataset.chunks = String(++chunks);
      if (thought) {
        if (!thinking) {
          const text = element("div", { className: "content" });
          const fold = element("details", { className: "thinking" }, element("summary", { textContent: "Thinking" }), text);
          turn.insertBefore(fold, content);
          thinking = { fold, text };
        }
        thinking.text.textContent += thought;
      }
      if (delta.content) content.textContent += delta.content;
      if (delta.audio) {
        audioId ??= delta.audio.id ?? null;
        if (delta.audio.transcript) content.textContent += delta.audio.transcript;
        if (delta.audio.data) {
          speaking.play(delta.audio.data);
          turn.dataset.audioSeconds = speaking.seconds.toFixed(2);
        }
      }
      for (const piece of delta.tool_calls ?? []) {
        let shown = calls[piece.index];
        if (!shown) {
          const view = element("pre", { className: "tool-call" });
          turn.insertBefore(view, stats);
          shown = calls[piece.index] = { id: piece.id, name: "", args: "", view };
        }
        shown.name += piece.function?.name ?? "";
        shown.args += piece.function?.arguments ?? "";
        shown.view.textContent = `${shown.name}(${shown.args})`;
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") showError(chatForm, error);
  } finally {
    running = null;
    $("#chat-stop").disabled = true;
  }
  const end = performance.now();
  if (first !== null) {
    const tokens = usage?.completion_tokens ?? chunks;
    const rate = tokens > 1 ? ((tokens - 1) / ((end - first) / 1000)).toFixed(1) : "–";
    const thought = usage?.completion_tokens_details?.reasoning_tokens;
    const spent = thought ? ` (${thought} thinking)` : "";
    stats.textContent = `first token ${Math.round(first - started)} ms · ${rate} tokens/s · ${tokens} tokens${spent}`;
  }
  // A spoken answer is named by its audio id in later turns, as OpenAI's audio models take it.
  const reply = audioId ? { role: "assistant", audio: { id: audioId } } : { role: "assistant", content: content.textContent || null };
  if (calls.length) {
    reply.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.args } }));
  }
  history.push(reply);
  // The playground runs no tools: say so, so the conversation can go on.
  for (const c of calls) history.push({ role: "tool", tool_call_id: c.id, content: "(not run in the playground)" });
});

chatForm.message.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) chatForm.requestSubmit();
});
$("#chat-stop").addEventListener("click", () => {
  running?.abort();
  player?.stop();
  player = null;
});
$("#chat-clear").addEventListener("click", () => {
  running?.abort();
  player?.stop();
  player = null;
  history = [];
  attachments = [];
  showAttachments();
  $("#transcript").replaceChildren();
});

// --- embeddings ------------------------------------------------------------------------------------------

const embeddingsForm = $("#embeddings-form");
embeddingsForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  showError(embeddingsForm, null);
  const texts = embeddingsForm.texts.value.split("\n").map((t) => t.trim()).filter(Boolean);
  try {
    const answer = await (await call("/embeddings", { body: { model: embeddingsForm.model.value, input: texts } })).json();
    const vectors = answer.data.map((d) => d.embedding);
    const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));
    const short = (t) => (t.length > 28 ? `${t.slice(0, 27)}…` : t);
    const head = element("tr", {}, element("th", { scope: "col", textContent: "" }), ...texts.map((t) => element("th", { scope: "col", textContent: short(t) })));
    const rows = vectors.map((a, i) =>
      element("tr", {}, element("th", { scope: "row", textContent: short(texts[i]) }),
        ...vectors.map((b) => {
          const value = cosine(a, b);
          return element("td", { textContent: value.toFixed(3), style: `--s:${Math.max(0, value)}` });
        })),
    );
    const caption = element("caption", { textContent: `Cosine similarity (${vectors[0].length} dimensions, ${answer.usage.prompt_tokens} tokens)` });
    $("#similarity").replaceChildren(element("table", {}, caption, element("thead", {}, head), element("tbody", {}, ...rows)));
  } catch (error) {
    showError(embeddingsForm, error);
  }
});

// --- speech ----------------------------------------------------------------------------------------------

const speechForm = $("#speech-form");
speechForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  showError(speechForm, null);
  const format = speechForm.response_format.value;
  const body = {
    model: speechForm.model.value,
    voice: speechForm.voice.value,
    input: speechForm.input.value,
    speed: Number(speechForm.speed.value),
    response_format: format,
  };
  try {
    const audio = await (await call("/audio/speech", { body })).blob();
    const url = URL.createObjectURL(audio);
    const player = $("#speech-audio");
    if (player.src) URL.revokeObjectURL(player.src);
    player.src = url;
    Object.assign($("#speech-download"), { href: url, download: `speech.${format}` });
    $("#speech-result").hidden = false;
    await player.play().catch(() => {});
  } catch (error) {
    showError(speechForm, error);
  }
});

// --- transcription ---------------------------------------------------------------------------------------

const transcriptionForm = $("#transcription-form");
let recording = null;
let recorded = null;

$("#record").addEventListener("click", async () => {
  if (recording) {
    recording.stop();
    return;
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const parts = [];
    recording = new MediaRecorder(stream);
    recording.ondataavailable = (event) => parts.push(event.data);
    recording.onstop = () => {
      stream.getTracks().forEach((track) => track.stop());
      recorded = new Blob(parts, { type: recording.mimeType });
      $("#recorded").textContent = `Recorded ${(recorded.size / 1024).toFixed(0)} KiB: it is transcribed instead of a file.`;
      $("#record").textContent = "Record from microphone";
      recording = null;
    };
    recording.start();
    $("#record").textContent = "Stop recording";
    $("#recorded").textContent = "Recording…";
  } catch (error) {
    showError(transcriptionForm, new Error(`The microphone is not available: ${error.message}`));
  }
});
transcriptionForm.file.addEventListener("change", () => {
  recorded = null;
  $("#recorded").textContent = "";
});

transcriptionForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  showError(transcriptionForm, null);
  const file = recorded ?? transcriptionForm.file.files[0];
  if (!file) {
    showError(transcriptionForm, new Error("Choose an audio file or record one first."));
    return;
  }
  const form = new FormData();
  form.append("file", file, recorded ? "recording.webm" : file.name);
  form.append("model", transcriptionForm.model.value);
  form.append("response_format", "verbose_json");
  form.append("timestamp_granularities[]", "segment");
  if (transcriptionForm.language.value.trim()) form.append("language", transcriptionForm.language.value.trim());
  const result = $("#transcript-result");
  result.replaceChildren(element("p", { textContent: "Transcribing…" }));
  try {
    const answer = await (await call("/audio/transcriptions", { form })).json();
    const time = (s) => `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, "0")}`;
    const rows = (answer.segments ?? []).map((s) =>
      element("tr", {}, element("td", { textContent: `${time(s.start)} – ${time(s.end)}` }), element("td", { textContent: s.text.trim() })),
    );
    result.replaceChildren(
      element("p", { className: "transcript", textContent: answer.text.trim() }),
      element("table", {}, element("caption", { textContent: `Segments (${answer.language}, ${answer.duration.toFixed(1)} s)` }), element("tbody", {}, ...rows)),
    );
  } catch (error) {
    result.replaceChildren();
    showError(transcriptionForm, error);
  }
});

// --- voice (the Realtime API over WebRTC, as OpenAI's WebRTC guide does it) -------------------------------
// The page asks for a client secret (what an app's backend would mint with its API key and hand over), and
// the call is made with that secret alone: the microphone goes out as Opus, the answer comes back as a
// track the page plays, and the events come over the `oai-events` data channel. The server hears the user
// speak over an answer and stops it itself (`output_audio_buffer.cleared`).

const voiceForm = $("#voice-form");
let voice = null; // { peer, channel, stream, audio, lines: Map(item id → line), playingSince }

function voiceLine(role, text) {
  const line = element("li", { className: `turn ${role}` }, element("span", { className: "role", textContent: role }));
  const content = element("div", { className: "content", textContent: text });
  line.append(content);
  $("#voice-log").append(line);
  return content;
}

function stopVoice() {
  if (!voice) return;
  voice.peer.close();
  voice.stream.getTracks().forEach((track) => track.stop());
  voice.audio.srcObject = null;
  voice = null;
  $("#voice-start").textContent = "Start talking";
  $("#voice-status").textContent = "";
}

// How long answers were heard, for the page (and its tests) to show.
function heardUntilNow() {
  if (voice?.playingSince == null) return;
  const log = $("#voice-log");
  const seconds = (performance.now() - voice.playingSince) / 1000;
  log.dataset.audioSeconds = (Number(log.dataset.audioSeconds ?? 0) + seconds).toFixed(2);
  voice.playingSince = null;
}

function onVoiceEvent(event) {
  const log = $("#voice-log");
  switch (event.type) {
    case "input_audio_buffer.speech_started":
      $("#voice-status").textContent = "Listening…";
      break;
    case "input_audio_buffer.speech_stopped":
      $("#voice-status").textContent = "Thinking…";
      break;
    case "conversation.item.input_audio_transcription.completed":
      voiceLine("user", event.transcript);
      break;
    case "response.output_audio_transcript.delta":
      if (!voice.lines.has(event.item_id)) voice.lines.set(event.item_id, voiceLine("assistant", ""));
      voice.lines.get(event.item_id).textContent += event.delta;
      break;
    case "output_audio_buffer.started":
      voice.playingSince = performance.now();
      $("#voice-status").textContent = "Speaking…";
      break;
    case "output_audio_buffer.stopped":
      heardUntilNow();
      $("#voice-status").textContent = "Talk now.";
      break;
    case "output_audio_buffer.cleared":
      heardUntilNow();
      break;
    case "conversation.item.truncated":
      // What was not heard of an answer is cut from it: the page shows what the model will remember.
      if (voice.lines.has(event.item_id)) voice.lines.get(event.item_id).classList.add("cut");
      log.dataset.truncated = String(Number(log.dataset.truncated ?? 0) + 1);
      break;
    case "error":
      showError(voiceForm, new Error(event.error.message));
      break;
  }
}

$("#voice-start").addEventListener("click", async () => {
  if (voice) {
    stopVoice();
    return;
  }
  showError(voiceForm, null);
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true } });
  } catch (error) {
    showError(voiceForm, new Error(`The microphone is not available: ${error.message}`));
    return;
  }
  const peer = new RTCPeerConnection();
  const audio = new Audio();
  audio.autoplay = true;
  voice = { peer, stream, audio, lines: new Map(), playingSince: null };
  $("#voice-start").textContent = "Stop";
  $("#voice-status").textContent = "Connecting…";
  try {
    const session = {
      type: "realtime",
      model: voiceForm.model.value,
      audio: { input: { transcription: { model: "whisper-1" } }, output: { voice: voiceForm.voice.value } },
    };
    const secret = await (await call("/realtime/client_secrets", { body: { session } })).json();
    peer.ontrack = (event) => (audio.srcObject = event.streams[0]);
    stream.getTracks().forEach((track) => peer.addTrack(track, stream));
    const channel = peer.createDataChannel("oai-events");
    channel.onmessage = (message) => onVoiceEvent(JSON.parse(message.data));
    channel.onopen = () => ($("#voice-status").textContent = "Talk now.");
    peer.onconnectionstatechange = () => ["failed", "closed"].includes(peer.connectionState) && stopVoice();
    await peer.setLocalDescription(await peer.createOffer());
    const answer = await fetch(`${API}/realtime/calls`, {
      method: "POST",
      headers: { Authorization: `Bearer ${secret.value}`, "Content-Type": "application/sdp" },
      body: peer.localDescription.sdp,
    });
    if (!answer.ok) throw new Error((await answer.json()).error.message);
    await peer.setRemoteDescription({ type: "answer", sdp: await answer.text() });
  } catch (error) {
    stopVoice();
    showError(voiceForm, error);
  }
});

loadModels();

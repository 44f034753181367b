// The Vercel AI SDK against modelport, run by tests/server/test_ai_sdk.py: each case's outcome printed as
// one line of JSON (what the SDK made of the server's answers, or the error it raised).
//   node ai_sdk.mjs BASE_URL API_KEY API CASE MODEL     (API: responses | chat)
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

const [baseURL, apiKey, api, which, name] = process.argv.slice(2);
const sent = []; // the input items of each Responses request, as the SDK wrote them
const provider = createOpenAI({
  baseURL,
  apiKey,
  fetch: async (url, init) => {
    if (String(url).endsWith('/responses') && typeof init?.body === 'string') sent.push(JSON.parse(init.body).input);
    return fetch(url, init);
  },
});
const model = api === 'chat' ? provider.chat(name) : provider.responses(name);

const cases = {
  async text() {
    const whole = await generateText({ model, prompt: 'one two three' });
    const streamed = streamText({ model, prompt: 'one two three' });
    let pieces = '';
    for await (const piece of streamed.textStream) pieces += piece;
    return { whole: whole.text, finish: whole.finishReason, streamed: pieces, usage: (await streamed.usage).outputTokens };
  },
  async tools() {
    const asked = [];
    const lookUp = tool({
      description: 'Look a question up.',
      inputSchema: z.object({ text: z.string() }),
      execute: async ({ text }) => { asked.push(text); return 'forty-two'; },
    });
    const whole = await generateText({ model, prompt: 'What is the answer?', tools: { lookUp }, stopWhen: stepCountIs(2) });
    const streamed = streamText({ model, prompt: 'What is the answer?', tools: { lookUp }, stopWhen: stepCountIs(2) });
    const kinds = new Set();
    for await (const part of streamed.fullStream) kinds.add(part.type);
    return { asked, text: whole.text, steps: whole.steps.length, streamedText: await streamed.text, kinds: [...kinds] };
  },
  async history() {
    // A chat kept as the SDK keeps it: the answer's messages go back with the next question. Stored
    // responses (the SDK's default) give back its items by id (`item_reference`).
    const question = { role: 'user', content: 'one two three' };
    const first = await generateText({ model, messages: [question] });
    const messages = [question, ...first.response.messages, { role: 'user', content: 'four five' }];
    const second = await generateText({ model, messages });
    return { first: first.text, second: second.text, types: (sent[1] ?? []).map((item) => item.type ?? item.role) };
  },
  async shell() {
    // The provider's own shell tool: its calls come as `shell_call` items, and the SDK gives the call back by
    // reference (stored responses) with the output its `execute` made.
    const ran = [];
    const shell = provider.tools.shell({
      execute: async ({ action }) => {
        ran.push(action.commands);
        return { output: [{ stdout: 'a.txt', stderr: '', outcome: { type: 'exit', exitCode: 0 } }] };
      },
    });
    const result = await generateText({ model, prompt: 'ls -l', tools: { shell }, stopWhen: stepCountIs(2) });
    return { ran, text: result.text, types: (sent[1] ?? []).map((item) => item.type ?? item.role) };
  },
  async object() {
    const schema = z.object({ name: z.string().max(20), country: z.string().max(20) });
    const { object } = await generateObject({ model, schema, prompt: 'Name a city in France.', maxOutputTokens: 80, temperature: 0 });
    return { object };
  },
};

try {
  console.log(JSON.stringify({ ok: await cases[which]() }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error), body: error?.responseBody ?? null }));
}

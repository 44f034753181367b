// What the browser tests' page uses of the Agents SDK for JavaScript, as `window.agents`.
export { OpenAIRealtimeWebRTC, RealtimeAgent, RealtimeSession, tool } from "@openai/agents-realtime";

"""Tool calling, step by step: `plan` (the tools a request offers, how the model must answer, the answer
the decoder holds it to), `render` (the conversation with its calls and results as the template renders
it), `flat` (the flat function tools of the Responses and Realtime APIs as the chat path takes them). The
answer is read back into OpenAI's `tool_calls` by the model's format (`formats`: modelport's own JSON
answer in `json_answer`, each family's call syntax in its own module, which also writes its grammar)."""

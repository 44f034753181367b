"""Anthropic's Messages API as a face over the operation table: `POST /v1/messages` and its token count are
requests of the `chat.completions.create` row, translated on the way in and rendered in Anthropic's shapes
on the way out (whole, or as Anthropic's stream events); `GET /v1/models` answers in Anthropic's shape when a
request carries `anthropic-version`. Keys, projects, limits and usage are the row's, as for every face."""

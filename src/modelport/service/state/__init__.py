"""What the service keeps for its callers, in the store: stored chat completions, uploaded files, and
batches (`batch_runner` runs them beside live traffic); `listing` is the list shape they share."""

"""Audio: speech synthesised from text (`speech`), speech transcribed or translated to text
(`transcription`), and the audio formats both read and write (`codec`)."""

-- LMSP 6.1 and 6.2: what a response asks of its output (`text.format`, `tools`, `tool_choice`,
-- `parallel_tool_calls`) and the function calls it made. NULL means the default: plain text, no
-- tools, `auto`; the calls are written when the task finishes, as `output_text` is.
ALTER TABLE responses ADD COLUMN text_format TEXT;                            -- JSON: text.format
ALTER TABLE responses ADD COLUMN tools TEXT;                                  -- JSON: array of function tools
ALTER TABLE responses ADD COLUMN tool_choice TEXT;                            -- JSON: "auto" | "none" | "required" | {type, name}
ALTER TABLE responses ADD COLUMN parallel_tool_calls INTEGER NOT NULL DEFAULT 1;
ALTER TABLE responses ADD COLUMN output_calls TEXT;                           -- JSON: the finished response's calls

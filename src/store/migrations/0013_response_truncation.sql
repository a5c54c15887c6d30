-- OpenAI's `truncation` of a response: `disabled` (an input that does not fit is refused) or
-- `auto` (the oldest messages of the conversation are left out until it fits).
ALTER TABLE responses ADD COLUMN truncation TEXT NOT NULL DEFAULT 'disabled' CHECK (truncation IN ('disabled', 'auto'));

-- The filename the client gave, as written (NFC, without control or bidi characters, at most
-- 255 bytes): the key holds only an ASCII slug of it. NULL when the client gave none, and on
-- rows written before this migration (their downloads fall back to the key's own name).
ALTER TABLE uploads ADD COLUMN original_filename TEXT;
ALTER TABLE file_handles ADD COLUMN original_filename TEXT;

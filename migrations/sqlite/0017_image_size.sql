-- SQLite twin of migrations/postgres/0017_image_size.sql: an image's width and height as
-- displayed, read from its header at commit; NULL on other files and on older ones.
ALTER TABLE file_handles ADD COLUMN image_width INTEGER;
ALTER TABLE file_handles ADD COLUMN image_height INTEGER;

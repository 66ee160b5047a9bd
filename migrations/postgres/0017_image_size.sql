-- Issue 37: an image's width and height as displayed (its orientation applied), read from its
-- header at commit. NULL on files that are not images, and on files committed before.
ALTER TABLE file_handles ADD COLUMN image_width BIGINT, ADD COLUMN image_height BIGINT;

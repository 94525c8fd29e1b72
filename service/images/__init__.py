"""Images: checks, blind copies and the content-addressed store (docs/guide.md, *Image campaigns*)."""

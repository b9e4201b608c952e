// In no module folder.

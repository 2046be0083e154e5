"""Finding types (the catalogue), incidents (a root cause and its symptoms) and the findings pipeline."""

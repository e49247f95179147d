# Doxygen input filter (docs/Doxyfile.in): sublet's headers explain each declaration in plain
# `//` comments, which Doxygen skips; as `///` they become the API page's descriptions.
# Section rules such as `// ---- metadata ----` describe no declaration and are dropped.
/^[[:space:]]*\/\/ *----/d
s|^\([[:space:]]*\)//\([^/!]\)|\1///\2|
s|^\([[:space:]]*\)//$|\1///|

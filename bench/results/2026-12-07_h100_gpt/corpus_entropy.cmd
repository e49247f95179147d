build/examples/text_corpus_entropy /usr/share/doc/python3.11/html/_sources   # the default corpus (Debian's python3.11-doc), on the development machine

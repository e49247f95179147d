// Token ids of a UTF-8 text file from the npm package's own JavaScript GPT-2 encoder, space
// separated on one line: the reference sublet's tokenizer is checked against.
//   node encode_with_npm.js PACKAGE_DIR TEXT_FILE   (PACKAGE_DIR holds Encoder.js, encoder.json, vocab.bpe)
'use strict';
const fs = require('fs');
const path = require('path');
const [packageDir, textFile] = process.argv.slice(2);
const { encode } = require(path.resolve(packageDir, 'Encoder.js'));
process.stdout.write(encode(fs.readFileSync(textFile, 'utf-8')).join(' ') + '\n');

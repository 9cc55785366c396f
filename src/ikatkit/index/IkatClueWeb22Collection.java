package io.anserini.collection;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.zip.GZIPInputStream;

/**
 * Raw ClueWeb22 records segmented the iKAT way inside Anserini's indexing threads: ikatkit's rule splitter
 * ({@code ikatkit.collection.segment}) written again in Java, so no passage JSONL is written and parsed again.
 * Gives the same passages as the Python segmenter (tests compare them); ikatkit uses it for the rule splitter.
 *
 * <p>Input files are named {@code <n>.json[l][.gz]}, n their index in the build's input list. Each file's counts,
 * skipped records and error go to {@code <ikatkit.reports>/<n>.json} when it ends; passage-id hashes (8 bytes
 * of SHA-256, the file index, the line) to the bucket files in {@code ikatkit.hashes}, one set per thread,
 * as {@code ikatkit.index.dupes} reads them.
 */
public class IkatClueWeb22Collection extends DocumentCollection<IkatClueWeb22Collection.Passage> {
  static final int MAX_CHARS = 10_000;
  static final int WINDOW = 10;
  static final int STRIDE = 5;
  static final int MAX_KEPT_PROBLEMS = 20;
  static final int BUCKETS = 256;
  static final int FLUSH_RECORDS = 1 << 16;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonFactory JSON_FACTORY = new JsonFactory();

  public IkatClueWeb22Collection(Path path) {
    this.path = path;
  }

  public IkatClueWeb22Collection() {}

  @Override
  public FileSegment<Passage> createFileSegment(Path path) throws IOException {
    return new Segment(path);
  }

  @Override
  public FileSegment<Passage> createFileSegment(BufferedReader reader) {
    throw new UnsupportedOperationException("IkatClueWeb22Collection reads files only");
  }

  /** Python's str.isspace(), which its re module's \s and str.strip() follow. */
  static boolean isSpace(char c) {
    if (c <= ' ') {
      return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
    }
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028
        || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
  }

  /** A passage Anserini would drop (Java's trim() empties it) or that is only white space: skipped and counted. */
  static boolean isBlank(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c > ' ' && !isSpace(c)) {
        return false;
      }
    }
    return true;
  }

  static String strip(String text) {
    int start = 0;
    int end = text.length();
    while (start < end && isSpace(text.charAt(start))) {
      start++;
    }
    while (end > start && isSpace(text.charAt(end - 1))) {
      end--;
    }
    return text.substring(start, end);
  }

  /** ikatkit's rule_splitter: after ., ! or ? (and one closing quote or bracket), white space, then any
   *  opening quotes or brackets and an upper-case letter or digit. */
  static List<String> sentences(String text) {
    List<String> found = new ArrayList<>();
    text = strip(text);
    if (text.isEmpty()) {
      return found;
    }
    int n = text.length();
    int start = 0;
    for (int i = 0; i < n; i++) {
      char c = text.charAt(i);
      if (c != '.' && c != '!' && c != '?') {
        continue;
      }
      int end = i + 1;
      if (end < n && "\"')]".indexOf(text.charAt(end)) >= 0) {
        end++;
      }
      int next = end;
      while (next < n && isSpace(text.charAt(next))) {
        next++;
      }
      if (next == end) {
        continue;
      }
      int look = next;
      while (look < n && "\"'([".indexOf(text.charAt(look)) >= 0) {
        look++;
      }
      if (look == n || !((text.charAt(look) >= 'A' && text.charAt(look) <= 'Z')
          || (text.charAt(look) >= '0' && text.charAt(look) <= '9'))) {
        continue;
      }
      found.add(text.substring(start, end));
      start = next;
      i = next - 1;
    }
    found.add(text.substring(start));
    return found;
  }

  /** Print the passages of the files named (n.json[.gz]) as JSON lines, as they would be indexed (for tests). */
  public static void main(String[] args) throws IOException {
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    for (String name : args) {
      try (Segment segment = new Segment(Paths.get(name))) {
        for (Passage passage : segment) {
          out.println(passage.raw());
        }
      }
    }
    out.flush();
  }

  /** ikatkit.collection.segment.segment with the rule splitter. */
  static List<Passage> segment(String docId, String cleanText) {
    String text = strip(cleanText.replace('\n', ' '));
    if (text.codePointCount(0, text.length()) > MAX_CHARS) {
      text = text.substring(0, text.offsetByCodePoints(0, MAX_CHARS));
    }
    List<String> sentences = sentences(text);
    List<Passage> passages = new ArrayList<>();
    for (int i = 0; i < sentences.size(); i += STRIDE) {
      passages.add(new Passage(docId + ":" + passages.size(),
          String.join(" ", sentences.subList(i, Math.min(i + WINDOW, sentences.size())))));
      if (i + WINDOW >= sentences.size()) {
        break;
      }
    }
    return passages;
  }

  /** One passage: id, text and, as raw, the JSON line the Python segmenter would have written. */
  public static final class Passage implements SourceDocument {
    private final String id;
    private final String contents;

    Passage(String id, String contents) {
      this.id = id;
      this.contents = contents;
    }

    @Override
    public String id() {
      return id;
    }

    @Override
    public String contents() {
      return contents;
    }

    @Override
    public String raw() {
      return "{\"id\": \"" + quoted(id) + "\", \"contents\": \"" + quoted(contents) + "\"}";
    }

    /** The text as inside a JSON string; itself when nothing needs escaping, as in most passages (raw() took
     *  about 3.5 us a passage with Jackson's encoder on every text, 2 us so). */
    static String quoted(String text) {
      for (int i = 0; i < text.length(); i++) {
        char c = text.charAt(i);
        if (c < ' ' || c == '"' || c == '\\') {
          return new String(JsonStringEncoder.getInstance().quoteAsString(text));
        }
      }
      return text;
    }

    @Override
    public boolean indexable() {
      return true;
    }
  }

  /** One thread's passage-id hash records, appended to its own bucket files. */
  static final class Hashes {
    private static final ThreadLocal<Hashes> OF_THREAD = ThreadLocal.withInitial(Hashes::new);
    private final MessageDigest sha256;
    private final long[] hashes = new long[FLUSH_RECORDS];
    private final int[] files = new int[FLUSH_RECORDS];
    private final int[] lines = new int[FLUSH_RECORDS];
    private int size;

    private Hashes() {
      try {
        sha256 = MessageDigest.getInstance("SHA-256");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    static Hashes ofThread() {
      return OF_THREAD.get();
    }

    void add(String id, int file, long line) throws IOException {
      byte[] digest = sha256.digest(id.getBytes(StandardCharsets.UTF_8));
      hashes[size] = ByteBuffer.wrap(digest, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
      files[size] = file;
      lines[size] = (int) line;
      if (++size == FLUSH_RECORDS) {
        flush();
      }
    }

    void flush() throws IOException {
      if (size == 0) {
        return;
      }
      String folder = System.getProperty("ikatkit.hashes");
      ByteBuffer[] buckets = new ByteBuffer[BUCKETS];
      int[] counts = new int[BUCKETS];
      for (int i = 0; i < size; i++) {
        counts[(int) (hashes[i] >>> 56)]++;
      }
      for (int i = 0; i < size; i++) {
        int bucket = (int) (hashes[i] >>> 56);
        if (buckets[bucket] == null) {
          buckets[bucket] = ByteBuffer.allocate(counts[bucket] * 16).order(ByteOrder.LITTLE_ENDIAN);
        }
        buckets[bucket].putLong(hashes[i]).putInt(files[i]).putInt(lines[i]);
      }
      for (int bucket = 0; bucket < BUCKETS; bucket++) {
        if (buckets[bucket] == null) {
          continue;
        }
        Path path = Paths.get(folder, String.format("%03d-t%d.bin", bucket, Thread.currentThread().getId()));
        try (OutputStream out = Files.newOutputStream(path, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
          out.write(buckets[bucket].array());
        }
      }
      size = 0;
    }
  }

  /** One input file: its records segmented, its passages one at a time, its report at the end. */
  public static final class Segment extends FileSegment<Passage> {
    private final int file;
    private final ArrayDeque<Passage> pending = new ArrayDeque<>();
    private final Hashes hashes = Hashes.ofThread();
    private final ObjectNode report = JSON.createObjectNode();
    private final ArrayNode problems = report.putArray("problems");
    private long line;
    private long documents;
    private long passages;
    private long skippedRecords;

    public Segment(Path path) throws IOException {
      super(path);
      String name = path.getFileName().toString();
      file = Integer.parseInt(name.substring(0, name.indexOf('.')));
      InputStream in = Files.newInputStream(path);
      if (name.endsWith(".gz")) {
        in = new GZIPInputStream(in, 1 << 16);
      }
      bufferedReader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)), 1 << 16);
    }

    @Override
    protected void readNext() throws NoSuchElementException {
      while (pending.isEmpty()) {
        String text;
        try {
          text = bufferedReader.readLine();
          if (text == null) {
            end(null);
          }
          line++;
          read(text);
        } catch (IOException e) {
          end(e.toString());
        }
      }
      bufferedRecord = pending.poll();
    }

    private void read(String text) throws IOException {
      if (strip(text).isEmpty()) {
        return;
      }
      String id = null;
      String clean = null;
      try (JsonParser parser = JSON_FACTORY.createParser(text)) {
        if (parser.nextToken() != JsonToken.START_OBJECT) {
          parser.skipChildren();
          if (parser.nextToken() != null) {
            throw new JsonParseException(parser, "extra data after the value");
          }
          skip("not a JSON object");
          return;
        }
        for (JsonToken token = parser.nextToken(); token == JsonToken.FIELD_NAME; token = parser.nextToken()) {
          String field = parser.currentName();
          JsonToken value = parser.nextToken();
          if ("ClueWeb22-ID".equals(field)) {
            id = value == JsonToken.VALUE_STRING ? parser.getText() : null;
          } else if ("Clean-Text".equals(field)) {
            clean = value == JsonToken.VALUE_STRING ? parser.getText() : null;
          } else {
            parser.skipChildren();
          }
        }
        if (parser.nextToken() != null) {
          throw new JsonParseException(parser, "extra data after the object");
        }
      } catch (JsonProcessingException e) {
        skip("invalid JSON (" + e.getOriginalMessage() + ")");
        return;
      }
      if (id == null || clean == null) {
        skip("missing ClueWeb22-ID or Clean-Text");
        return;
      }
      documents++;
      for (Passage passage : segment(id, clean)) {
        if (isBlank(passage.contents)) {
          skip("blank passage text");
          continue;
        }
        passages++;
        hashes.add(passage.id, file, line);
        pending.add(passage);
      }
    }

    private void skip(String reason) {
      skippedRecords++;
      if (problems.size() < MAX_KEPT_PROBLEMS) {
        problems.addArray().add(line).add(reason);
      }
    }

    /** Write the report (and flush the hashes); then the segment has no more passages. */
    private void end(String error) throws NoSuchElementException {
      atEOF = true;
      report.put("documents", documents).put("passages", passages).put("skipped", skippedRecords);
      report.put("error", error);
      try {
        hashes.flush();
        Path folder = Paths.get(System.getProperty("ikatkit.reports"));
        Path temporary = folder.resolve(String.format(".%d.json.tmp", file));
        Files.writeString(temporary, report.toString());
        Files.move(temporary, folder.resolve(String.format("%d.json", file)), StandardCopyOption.ATOMIC_MOVE);
      } catch (IOException e) {
        throw new IllegalStateException("ikatkit: cannot write the report of " + path + ": " + e, e);
      }
      throw new NoSuchElementException();
    }
  }
}

package ikatkit;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.util.BytesRef;

/**
 * Term statistics for ikatkit's lexical scorer, each in one call from Python instead of one per term: the
 * tokens an analyzer makes of a text, and the document frequencies of many terms in an index's field.
 */
public final class TermStats {
  private TermStats() {}

  /** The tokens {@code analyzer} makes of {@code text}, in order (as Anserini's AnalyzerUtils.analyze). */
  public static String[] analyze(Analyzer analyzer, String field, String text) throws IOException {
    List<String> tokens = new ArrayList<>();
    try (TokenStream stream = analyzer.tokenStream(field, text)) {
      CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
      stream.reset();
      while (stream.incrementToken()) {
        tokens.add(term.toString());
      }
      stream.end();
    }
    return tokens.toArray(new String[0]);
  }

  /**
   * The tokens of each text joined by spaces (a token never holds whitespace): one call and one Java string per
   * text, where a string per token would cost a conversion each in Python.
   */
  public static String[] analyzeAll(Analyzer analyzer, String field, String[] texts) throws IOException {
    String[] joined = new String[texts.length];
    for (int i = 0; i < texts.length; i++) {
      joined[i] = String.join(" ", analyze(analyzer, field, texts[i]));
    }
    return joined;
  }

  /** How many documents contain each term in {@code field} ({@code IndexReader.docFreq}, one term enum per segment). */
  public static int[] docFreqs(IndexReader reader, String field, String[] terms) throws IOException {
    int[] counts = new int[terms.length];
    for (LeafReaderContext leaf : reader.leaves()) {
      Terms indexed = leaf.reader().terms(field);
      if (indexed == null) {
        continue;
      }
      TermsEnum seek = indexed.iterator();
      for (int i = 0; i < terms.length; i++) {
        if (seek.seekExact(new BytesRef(terms[i]))) {
          counts[i] += seek.docFreq();
        }
      }
    }
    return counts;
  }
}
